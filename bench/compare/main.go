// Command compare times two (to four) commands alternately, in one run,
// and prints each one's median and p90 and the ratio of the medians to the
// first's. Alternating (A, B, A, B, ...) makes all see the same machine
// noise, which matters on shared 2-core machines where absolute figures
// drift. Commands run without a shell.
//
//	compare -n 200 -name-a airlock -name-b bwrap -- airlock run -- /bin/true ::: bwrap ... /bin/true
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"time"
)

type result struct {
	Name     string   `json:"name"`
	Argv     []string `json:"argv"`
	MedianMS float64  `json:"median_ms"`
	P90MS    float64  `json:"p90_ms"`
	MinMS    float64  `json:"min_ms"`
}

func main() {
	n := flag.Int("n", 100, "runs of each command")
	warmup := flag.Int("warmup", 5, "untimed runs of each command first")
	nameA := flag.String("name-a", "A", "name of the first command")
	nameB := flag.String("name-b", "B", "name of the second command")
	nameC := flag.String("name-c", "C", "name of the third command, if any")
	nameD := flag.String("name-d", "D", "name of the fourth command, if any")
	jsonOut := flag.String("json", "", "also write the result as JSON to `FILE`")
	flag.Parse()
	cmds, ok := split(flag.Args())
	if !ok || len(cmds) > 4 {
		fmt.Fprintln(os.Stderr, "usage: compare [flags] CMD-A ARGS ::: CMD-B ARGS [::: CMD-C ARGS [::: CMD-D ARGS]]")
		os.Exit(2)
	}
	names := []string{*nameA, *nameB, *nameC, *nameD}[:len(cmds)]
	for i := 0; i < *warmup; i++ {
		for _, c := range cmds {
			must(run(c))
		}
	}
	ts := make([][]time.Duration, len(cmds))
	for i := 0; i < *n; i++ {
		// Rotate which goes first so none always follows another.
		for j := range cmds {
			k := (i + j) % len(cmds)
			ts[k] = append(ts[k], must(run(cmds[k])))
		}
	}
	rs := make([]result, len(cmds))
	for k := range cmds {
		rs[k] = summarize(names[k], cmds[k], ts[k])
		fmt.Printf("%-10s median %8.2f ms  p90 %8.2f ms  min %8.2f ms  (%s)\n", rs[k].Name, rs[k].MedianMS, rs[k].P90MS, rs[k].MinMS, join(cmds[k]))
	}
	out := map[string]any{"a": rs[0], "b": rs[1], "ratio": rs[0].MedianMS / rs[1].MedianMS, "n": *n}
	fmt.Printf("ratio %s/%s of medians: %.3f  (n=%d each, alternating)\n", rs[0].Name, rs[1].Name, rs[0].MedianMS/rs[1].MedianMS, *n)
	for k, key := range []string{"", "", "c", "d"} {
		if k < 2 || k >= len(rs) {
			continue
		}
		out[key] = rs[k]
		out["ratio_a_"+key] = rs[0].MedianMS / rs[k].MedianMS
		fmt.Printf("ratio %s/%s of medians: %.3f\n", rs[0].Name, rs[k].Name, rs[0].MedianMS/rs[k].MedianMS)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(out, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// split cuts args at each ":::" into two or more non-empty commands.
func split(args []string) ([][]string, bool) {
	var cmds [][]string
	cur := []string{}
	for _, s := range args {
		if s == ":::" {
			cmds, cur = append(cmds, cur), []string{}
			continue
		}
		cur = append(cur, s)
	}
	cmds = append(cmds, cur)
	for _, c := range cmds {
		if len(c) == 0 {
			return nil, false
		}
	}
	return cmds, len(cmds) >= 2
}

func run(argv []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s: %w", join(argv), err)
	}
	return d, nil
}

func must(d time.Duration, err error) time.Duration {
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
	return d
}

func summarize(name string, argv []string, ds []time.Duration) result {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000 }
	return result{Name: name, Argv: argv, MedianMS: q(0.5), P90MS: q(0.9), MinMS: q(0)}
}

func join(argv []string) string {
	s := ""
	for i, a := range argv {
		if i > 0 {
			s += " "
		}
		s += a
	}
	return s
}
