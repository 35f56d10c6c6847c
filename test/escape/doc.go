// Package escape is Airlock's red-team suite: attack programs
// (./attacks) that try to get out of a sandbox, and a runner (TestEscape,
// `make escape`) that first proves each attack works unconfined on the test
// host, then tries it against every available backend and writes the
// scorecard (docs/escape-scorecard.md and .json). Bait it plants is fake and
// removed afterwards; it must never weaken an attack to make a backend pass.
package escape
