// Command microvm benchmarks the microvm backend under TCG beside its
// peer, alternating in one run (bench/microvm.sh runs it):
//
//   - cold: Create (the VM booted, no template) to the first exec's exit;
//   - restore: Create restored from a template to the first exec's exit;
//   - peer: qemu-system-x86_64 -M microvm booting the same kernel, with
//     the same machine options and command line, and a trivial init that
//     writes one line to the console: start to that line.
//
// It prints medians, p90 and each ratio to the peer (target <= 1.1), and
// writes them as JSON with -json.
package main
