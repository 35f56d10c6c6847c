// Package hostfs is the backend-neutral part of planning a sandbox's view
// of the host filesystem, shared by the native and gVisor backends: path
// arithmetic for mount plans (coverage, depth order, the host path behind a
// bind), cleanup of the workspace placeholders earlier versions made, and
// the default state directory.
//
// Each backend keeps its own mount representation; this package only says
// what to mount where. It must never mount anything, never follow a symlink
// the sandbox could have planted, and never remove a file it did not create.
package hostfs
