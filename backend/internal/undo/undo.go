// Package undo is the stack of what a backend's Create has done on the
// host, undone in reverse when a later stage fails: every backend leaves
// nothing behind (no mount, cgroup, process, container or temp dir) when
// Create fails. It must never run an undo twice or out of order.
package undo

// Stack holds undo steps; Run runs them newest first, once.
type Stack []func()

// Push registers what undoes the step just taken.
func (s *Stack) Push(f func()) { *s = append(*s, f) }

// Run runs the steps newest first and empties the stack.
func (s *Stack) Run() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
	*s = nil
}
