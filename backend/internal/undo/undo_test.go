package undo

import (
	"slices"
	"testing"
)

func TestStack(t *testing.T) {
	var got []int
	var s Stack
	for i := 0; i < 3; i++ {
		s.Push(func() { got = append(got, i) })
	}
	s.Run()
	s.Run()
	if !slices.Equal(got, []int{2, 1, 0}) {
		t.Fatalf("ran %v, want 2 1 0 once", got)
	}
}
