// Package wasm is Airlock's WebAssembly backend: a sandbox is a WASI
// preview-1 environment run in-process by wazero (pure Go, so the binary stays
// static and the backend works on every OS). Processes are WASI command
// modules named by a path inside the sandbox or by a registered name (ruby,
// Config.Commands); they see only the directories the filesystem policy
// grants, get no sockets, and are stopped at their memory, time and output
// limits.
//
// It must never give a guest a host resource the policy does not name: no
// directory outside the policy's preopens (opened through os.Root, so ".."
// and symbolic links cannot leave them), no socket, no host function beyond
// WASI and the inert stubs an interpreter build needs; and it must never
// download anything at run time (interpreter builds come from the asset
// directory that `make wasm-assets` fills).
//
// # What a sandbox sees
//
//   - the workspace read-write at its host path (a private directory at
//     /workspace when the policy has none), read_only and read_write
//     directories at their host paths, a private /tmp and each tmpfs path,
//     the rootfs read-only at / if the policy has one; otherwise / is an
//     empty read-only directory holding the way to each mount point. WASI
//     preopens are directories: a policy path that is a file is not granted
//     (logged). Spec.Files are placed read-only in a private directory
//     mounted over their parent directory.
//   - deny paths are inaccessible and protect_config paths read-only (and
//     their parents cannot be removed or renamed), checked on the path as
//     given and, on Linux, on the path the kernel resolved (/proc/self/fd),
//     so symlinks and hard links do not reach them.
//   - the policy's environment (Policy.Environ), then Spec.Env, then the
//     request's, and PWD set to the working directory.
//
// # Limits and exit status
//
//   - memory: the linear memories of a sandbox's running modules share
//     Limits.Memory; a grow past it fails and the module is stopped:
//     ExitStatus{OOM, Code 137, Signal 9} and a line on its stderr.
//   - wall time: the request's Timeout or Limits.Timeout stops the module
//     (compiled with close-on-context-done; sleeps and blocked stdin reads
//     are released too): ExitStatus{TimedOut, Code 137, Signal 9}. Destroy
//     stops running modules the same way (Code 137).
//   - output: stdout and stderr together are cut at Limits.OutputBytes; the
//     module keeps running and the status says Truncated.
//   - disk: each private directory (/tmp, tmpfs paths, the private
//     workspace) takes at most Limits.DiskBytes of writes; open files per
//     process at most Limits.OpenFiles. Both fail the call with EIO (WASI
//     through wazero has no ENOSPC or EMFILE).
//   - the exit code is proc_exit's (255 when larger); a trap (a wasm runtime
//     error) is exit code 1 with the trap on stderr.
//   - no signals, terminals or processes (Signal and TTY are
//     ErrNotSupported); CPU and pids limits do not apply (one module is one
//     goroutine). Stats reports linear memory, not CPU time.
//
// Private directories live in /dev/shm when it is writable (memory, like
// the tmpfs other backends mount), named airlock-wasm-<id>.<pid>.*, so that
// Cleanup removes only those of processes that have ended.
package wasm
