package hostfs

// Placeholder is an empty file the host created in the workspace as the
// mount point for a protected path that did not exist. All placeholders of
// one sandbox are hard links to one inode (creating inodes is what costs on
// ext4; links are cheap), so removal can check that a path is still ours.
type Placeholder struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}
