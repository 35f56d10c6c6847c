// Package hostfs is the backend-neutral part of planning a sandbox's view
// of the host filesystem, shared by the native and gVisor backends: path
// arithmetic for mount plans (coverage, depth order, the host path behind a
// bind), the plan that protects workspace config (which paths become
// read-only self-binds, which anchor directories become mount points, where
// placeholders must be created), the placeholders themselves, and the
// default state directory where a backend records them.
//
// Each backend keeps its own mount representation; this package only says
// what to mount where. It must never mount anything, never follow a symlink
// the sandbox could have planted when it creates or removes anything on the
// host, and never remove a file it did not create.
package hostfs
