//go:build !linux

package hostfs

// RemovePlaceholders has nothing to remove where none were ever created.
func RemovePlaceholders(ph []Placeholder) error { return nil }
