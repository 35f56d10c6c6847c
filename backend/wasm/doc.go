// Package wasm is Airlock's WebAssembly backend: a sandbox is a WASI
// preview-1 environment run in-process by wazero (pure Go, so the binary stays
// static and the backend works on every OS). Processes are WASI command
// modules named by a path inside the sandbox or by a registered name (ruby);
// they see only the directories the filesystem policy grants, get no sockets,
// and are stopped at their memory, time and output limits.
//
// It must never give a guest a host resource the policy does not name: no
// directory outside the policy's preopens (opened through os.Root, so ".."
// and symbolic links cannot leave them), no socket, no host function beyond
// WASI and the inert stubs an interpreter build needs; and it must never
// download anything at run time (interpreter builds come from the asset
// directory that `make wasm-assets` fills).
package wasm
