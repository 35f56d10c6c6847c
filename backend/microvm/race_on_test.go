//go:build race

package microvm

// raceEnabled: this test binary has the race detector.
const raceEnabled = true
