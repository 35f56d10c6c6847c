package policy

import (
	"os"
	"testing"
)

// BenchmarkResolveDefault is what `airlock run` without a policy file pays.
func BenchmarkResolveDefault(b *testing.B) {
	env := testEnv()
	for b.Loop() {
		p, err := Profile("default")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Resolve(env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseFull loads and resolves a policy using every field.
func BenchmarkParseFull(b *testing.B) {
	data, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	env := testEnv()
	for b.Loop() {
		p, err := Parse("full.yaml", data)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Resolve(env); err != nil {
			b.Fatal(err)
		}
	}
}
