// Command compare times two commands alternately, in one run, and prints
// each one's median and p90 and the ratio of the medians. Alternating (A, B,
// A, B, ...) makes both see the same machine noise, which matters on shared
// 2-core machines where absolute figures drift. Commands run without a shell.
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
	jsonOut := flag.String("json", "", "also write the result as JSON to `FILE`")
	flag.Parse()
	a, b, ok := split(flag.Args())
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: compare [flags] CMD-A ARGS ::: CMD-B ARGS")
		os.Exit(2)
	}
	for i := 0; i < *warmup; i++ {
		must(run(a))
		must(run(b))
	}
	var ta, tb []time.Duration
	for i := 0; i < *n; i++ {
		// Alternate which goes first so neither always follows the other.
		if i%2 == 0 {
			ta = append(ta, must(run(a)))
			tb = append(tb, must(run(b)))
		} else {
			tb = append(tb, must(run(b)))
			ta = append(ta, must(run(a)))
		}
	}
	ra, rb := summarize(*nameA, a, ta), summarize(*nameB, b, tb)
	ratio := ra.MedianMS / rb.MedianMS
	fmt.Printf("%-10s median %8.2f ms  p90 %8.2f ms  min %8.2f ms  (%s)\n", ra.Name, ra.MedianMS, ra.P90MS, ra.MinMS, join(a))
	fmt.Printf("%-10s median %8.2f ms  p90 %8.2f ms  min %8.2f ms  (%s)\n", rb.Name, rb.MedianMS, rb.P90MS, rb.MinMS, join(b))
	fmt.Printf("ratio %s/%s of medians: %.3f  (n=%d each, alternating)\n", ra.Name, rb.Name, ratio, *n)
	if *jsonOut != "" {
		out, _ := json.MarshalIndent(map[string]any{"a": ra, "b": rb, "ratio": ratio, "n": *n}, "", "  ")
		if err := os.WriteFile(*jsonOut, append(out, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func split(args []string) (a, b []string, ok bool) {
	for i, s := range args {
		if s == ":::" {
			return args[:i], args[i+1:], i > 0 && i < len(args)-1
		}
	}
	return nil, nil, false
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
