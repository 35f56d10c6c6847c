package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/policy"
)

func TestOperatorConfigDefaults(t *testing.T) {
	c, err := ParseOperatorConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Profile != "default" || len(c.Profiles) == 0 {
		t.Errorf("defaults: %+v", c)
	}
	for _, n := range c.CapabilityCeiling() {
		if _, never := neverGranted[n]; never {
			t.Errorf("default ceiling holds %s", capName(n))
		}
	}
	if len(c.CapabilityCeiling()) != len(DefaultCapabilities) {
		t.Errorf("ceiling %v", c.CapabilityCeiling())
	}
}

func TestOperatorConfigRejects(t *testing.T) {
	for name, y := range map[string]string{
		"unknown field":       "profiles: [default]\nallow_everything: true\n",
		"unknown profile":     "profiles: [default, nope]\n",
		"relative policy":     "policies:\n  a: relative.yaml\n",
		"default not listed":  "policy: missing\n",
		"never-granted cap":   "capabilities: [CAP_CHOWN, CAP_SYS_ADMIN]\n",
		"unknown capability":  "capabilities: [CAP_FLY]\n",
		"unknown default one": "profile: nope\n",
	} {
		_, err := ParseOperatorConfig("/etc/airlock/oci.yaml", []byte(y))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "/etc/airlock/oci.yaml") {
			t.Errorf("%s: %v (want ErrInvalid naming the file)", name, err)
		}
	}
}

func TestChoosePolicyWithinCeiling(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "open.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\nnetwork:\n  mode: open\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ParseOperatorConfig("op", []byte("profiles: [default, strict]\npolicies:\n  open: "+pol+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ann  map[string]string
		want string // policy name, or "" for an error
	}{
		{nil, "profile default"},
		{map[string]string{AnnotationProfile: "strict"}, "profile strict"},
		{map[string]string{AnnotationProfile: "coding-agent"}, ""}, // exists, not allowed
		{map[string]string{AnnotationPolicy: "open"}, "policy open"},
		{map[string]string{AnnotationPolicy: pol}, ""}, // a path is never accepted
		{map[string]string{AnnotationPolicy: "open", AnnotationProfile: "strict"}, ""},
	} {
		_, name, err := c.choosePolicy(tc.ann)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%v: accepted as %s", tc.ann, name)
		case tc.want == "" && !errors.Is(err, errdefs.ErrInvalid):
			t.Errorf("%v: %v (want ErrInvalid)", tc.ann, err)
		case tc.want != "" && (err != nil || name != tc.want):
			t.Errorf("%v: %s %v, want %s", tc.ann, name, err, tc.want)
		}
	}
}

func TestDecideRefusesWhatRuntimeModeCannotEnforce(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := ParseOperatorConfig("op", []byte("policies:\n"+
		"  allow: "+write("a.yaml", "version: 1\nnetwork:\n  allow: [example.com]\n")+"\n"+
		"  secret: "+write("s.yaml", "version: 1\nnetwork:\n  mode: open\nsecrets:\n  - name: T\n    from_env: T\n    hosts: [example.com]\n")+"\n"+
		"  open: "+write("o.yaml", "version: 1\nnetwork:\n  mode: open\n")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"allow", "secret"} {
		if _, err := decide(c, map[string]string{AnnotationPolicy: n}); !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", n, err)
		}
	}
	d, err := decide(c, map[string]string{AnnotationPolicy: "open"})
	if err != nil || d.netNone {
		t.Errorf("open: %+v %v", d, err)
	}
	d, err = decide(c, nil)
	if err != nil || !d.netNone || len(d.ro) == 0 {
		t.Errorf("default profile: network none and read-only system dirs, got %+v %v", d, err)
	}
}

func TestClampCaps(t *testing.T) {
	ceil, _ := capSet(DefaultCapabilities)
	kept, dropped, err := clampCaps([]string{"CAP_CHOWN", "CAP_SYS_ADMIN", "net_raw", "CAP_CHOWN"}, ceil)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0] != capNum("CAP_CHOWN") || len(dropped) != 2 {
		t.Errorf("kept %v dropped %v", kept, dropped)
	}
	if _, _, err := clampCaps([]string{"CAP_NOPE"}, ceil); err == nil {
		t.Error("unknown capability accepted")
	}
}

func FuzzChoosePolicy(f *testing.F) {
	c, err := ParseOperatorConfig("", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("strict", "")
	f.Add("", "/etc/passwd")
	f.Fuzz(func(t *testing.T, prof, pol string) {
		ann := map[string]string{}
		if prof != "" {
			ann[AnnotationProfile] = prof
		}
		if pol != "" {
			ann[AnnotationPolicy] = pol
		}
		p, _, err := c.choosePolicy(ann)
		if pol != "" && err == nil {
			t.Fatalf("policy %q accepted with no operator policies", pol)
		}
		if err == nil && p == nil {
			t.Fatal("nil policy")
		}
	})
}

// The examples deploy/kubernetes ships parse, and mean what they say.
func TestDeployExamples(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/kubernetes/oci.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseOperatorConfig("oci.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Policies["pod-network"]; !ok || c.Profile != "default" {
		t.Errorf("oci.yaml: %+v", c)
	}
	p, err := policy.LoadFile("../../../deploy/kubernetes/pod-network-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.Policies["pod-network"] = "../../../deploy/kubernetes/pod-network-policy.yaml"
	d, err := decide(c, map[string]string{AnnotationPolicy: "pod-network"})
	if err != nil || d.netNone || p.Network.Mode != "open" {
		t.Errorf("pod-network policy: %+v %v", d, err)
	}
}
