// Package fsguard is the write mediator of sandboxes whose processes run on
// the host kernel: every call that creates, renames, links or opens for
// writing a file on a host-backed writable mount (the workspace, read_write
// paths, caches) reaches the host as a seccomp user notification, and the
// mediator performs it itself, on the sandbox's behalf and with its
// credentials, after policy.ConfigGuard allowed it — or refuses it, naming
// the rule. The sandbox's Landlock domain grants no write right on those
// mounts, so a call the mediator lets the kernel continue can never land
// there: when in doubt the mediator continues and the kernel refuses.
//
// It must never act on a path the sandbox could change between the check
// and the act (it resolves once, holds the directory open, and works
// relative to it), never follow a symlink or a magic link with the host's
// root, and never use more privilege than the sandbox's processes have.
package fsguard
