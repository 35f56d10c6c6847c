// Package interp runs code cells in a stateful interpreter — a "kernel" —
// inside a sandbox: Python, and JavaScript where node exists. It is the code
// interpreter behind POST /v1/sandboxes/{id}/code and the MCP run_code tool.
//
// The kernels are small standard-library programs embedded in this binary
// (kernel.py, kernel.js) and started with the sandbox's own exec as
// `python3 -c SOURCE` (or node through /bin/sh), so nothing is written into
// the sandbox, let alone the user's workspace. The host reaches a kernel only
// through that process's stdin and stdout:
//
//	host -> kernel   {"id": N, "code": "...", "env": {"NAME": "value"}}\n   (env: for this cell only)
//	kernel -> host   {"type": "ready", "language": "python", "version": "3.11.2"}\n   (once)
//	                 {"type": "result", "id": N, "stdout": "...", "stderr": "...",
//	                  "result": "repr" | null, "error": {"name","value","traceback"} | null,
//	                  "images": [{"format": "png", "data": "<base64>"}],
//	                  "truncated": false, "execution_count": N}\n
//
// SIGINT interrupts a running cell (its state is kept). Everything a kernel
// says is untrusted, since the code it runs is: a message is bounded
// (MaxMessage), must be valid JSON of the expected type and id, and arrive
// in time; a kernel that breaks any of that is killed and replaced on the
// next call, and the caller is told its state is gone. This package must
// never let a kernel's output grow host memory without bound, block the
// host forever or panic it.
package interp
