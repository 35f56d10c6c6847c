// Package cgroupfs holds the cgroup filesystem chores the native and gVisor
// backends share: writing limits (one writer, so that a limit means the
// same everywhere), reading counters and flat-keyed files, and removing a
// sandbox's cgroup directory while its last processes exit.
//
// It never creates cgroups or moves processes (each backend owns its
// layout), and it removes only the directory it is given.
package cgroupfs
