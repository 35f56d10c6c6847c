package microvm

// Template is a VM saved at the point where its init waits for its boot
// config: its RAM in a shared-memory file, its device state (~100 KB) in a
// file. Sandboxes of the same layout (RAM size, vCPUs, accelerator) are
// restored from it with the RAM mapped copy-on-write, so the file is never
// changed by them and serves every restore. It holds nothing of any
// sandbox: no share is mounted, no config received, and every restored VM
// gets its own clock and fresh entropy in its boot config.
type Template struct {
	Key       string `json:"key"`
	MemFile   string `json:"mem_file"`
	StateFile string `json:"state_file"`
	StateSize int64  `json:"state_size"`
	// BuildMillis is how long booting and saving it took.
	BuildMillis int64 `json:"build_ms"`
}
