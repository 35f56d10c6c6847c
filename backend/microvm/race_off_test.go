//go:build !race

package microvm

const raceEnabled = false
