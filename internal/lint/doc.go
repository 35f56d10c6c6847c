// Package lint holds repository-wide tests of the rules in STYLE.md that
// a compiler cannot check: every package says what it is for, raw
// host-path calls live only where the allow-list says why, and no
// function outgrows 80 lines unless the list of those waiting for their
// split names it. It has no code of its own and must never be imported.
package lint
