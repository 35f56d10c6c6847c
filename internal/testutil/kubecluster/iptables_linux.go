package kubecluster

import (
	"fmt"
	"os/exec"
	"strings"
)

// ours says whether an iptables line is one the cluster adds: the
// kubelet's KUBE-* chains (KUBE-KUBELET-CANARY, KUBE-FIREWALL, ...) and the
// CNI plugins' CNI-* ones. Only those are removed, so that a daemon that
// changes its own rules meanwhile (dockerd) keeps them.
func ours(line string) bool {
	return strings.Contains(line, "KUBE-") || strings.Contains(line, "CNI-")
}

// restoreIptables removes the rules, then the chains, that the cluster
// added since h was recorded, in iptables and ip6tables.
func (h *HostState) restoreIptables() []error {
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		out, err := exec.Command(tool + "-save").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", tool, err))
			continue
		}
		for table, lines := range parseSave(out) {
			before := map[string]bool{}
			for _, l := range h.Iptables[tool+"-save "+table] {
				before[l] = true
			}
			var chains []string
			for _, l := range lines {
				if before[l] || !ours(l) {
					continue
				}
				switch {
				case strings.HasPrefix(l, "-A "):
					// iptables-save quotes as a shell does.
					cmd := tool + " -w -t " + table + " -D " + strings.TrimPrefix(l, "-A ")
					if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
						errs = append(errs, fmt.Errorf("%s: %v: %s", cmd, err, out))
					}
				case strings.HasPrefix(l, ":"):
					chains = append(chains, strings.Fields(l[1:])[0])
				}
			}
			for _, c := range chains {
				_ = exec.Command(tool, "-w", "-t", table, "-F", c).Run()
				if out, err := exec.Command(tool, "-w", "-t", table, "-X", c).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s -X %s: %v: %s", tool, table, c, err, out))
				}
			}
			if _, existed := h.Iptables[tool+"-save "+table]; !existed {
				errs = append(errs, dropTable(tool, table)...)
			}
		}
	}
	return errs
}

// dropTable deletes a table the kubelet made (iptables-nft makes the nf
// table on first use: mangle, and ip6tables' filter, nat, mangle, absent
// on a host without IPv6 rules) once it holds nothing but its built-in
// chains with policy ACCEPT. iptables cannot delete a table; nft can.
func dropTable(tool, table string) []error {
	out, err := exec.Command(tool+"-save", "-t", table).Output()
	if err != nil {
		return []error{fmt.Errorf("%s-save -t %s: %w", tool, table, err)}
	}
	for _, l := range parseSave(out)[table] {
		if !strings.HasPrefix(l, ":") || !strings.HasSuffix(l, " ACCEPT") {
			return []error{fmt.Errorf("%s table %s was made by the cluster but now holds %q: left alone", tool, table, l)}
		}
	}
	family := "ip"
	if tool == "ip6tables" {
		family = "ip6"
	}
	if err := run("nft", "delete", "table", family, table); err != nil {
		return []error{err}
	}
	return nil
}
