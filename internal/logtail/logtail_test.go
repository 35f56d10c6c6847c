package logtail

import (
	"strings"
	"testing"
)

type rec struct{ lines []string }

func (r *rec) Warn(msg string, _ ...any) { r.lines = append(r.lines, msg) }

func TestLinesAndTail(t *testing.T) {
	tail := &Tail{Max: 8}
	r := &rec{}
	w := &Lines{Log: r, Prefix: "x: ", Tail: tail}
	w.Write([]byte("one\ntw"))
	w.Write([]byte("o\nthree"))
	if strings.Join(r.lines, "|") != "x: one|x: two" {
		t.Fatalf("lines %q", r.lines)
	}
	if got := tail.String(); got != "wo\nthree" {
		t.Fatalf("tail %q", got)
	}
	w.Write([]byte(strings.Repeat("y", 5000)))
	w.Write([]byte("\n"))
	if len(r.lines) != 3 || len(r.lines[2]) > 100 {
		t.Fatalf("an over-long line was not dropped: %d lines", len(r.lines))
	}
}
