//go:build !linux

package writeback

// oNoFollow: os.Root still keeps writes inside the root.
const oNoFollow = 0
