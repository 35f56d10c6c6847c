package hostfs

// Placeholder is an empty file an earlier version of Airlock created in a
// workspace as the mount point of a protected path that did not exist.
// Nothing creates them any more; RemovePlaceholders cleans up after those
// versions (their state files list them).
type Placeholder struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}
