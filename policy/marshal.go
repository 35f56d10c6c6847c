package policy

import (
	"bytes"

	"go.yaml.in/yaml/v3"
)

// MarshalYAML writes every limit, "unlimited" for 0 (no limit) or
// Unlimited, so that a shown policy says what it does and reads back the
// same (an omitted limit would be inherited from the profile instead).
func (l Limits) MarshalYAML() (any, error) {
	unl := func(set bool, v string) string {
		if !set {
			return "unlimited"
		}
		return v
	}
	size := func(b ByteSize) string { return unl(b > 0, b.String()) }
	type out struct {
		Memory      string `yaml:"memory"`
		CPUs        any    `yaml:"cpus"`
		Pids        any    `yaml:"pids"`
		OpenFiles   any    `yaml:"open_files"`
		Timeout     string `yaml:"timeout"`
		OutputBytes string `yaml:"output_bytes"`
		DiskBytes   string `yaml:"disk"`
	}
	num := func(set bool, v any) any {
		if !set {
			return "unlimited"
		}
		return v
	}
	return out{
		Memory:      size(l.Memory),
		CPUs:        num(l.CPUs > 0, l.CPUs),
		Pids:        num(l.Pids > 0, l.Pids),
		OpenFiles:   num(l.OpenFiles > 0, l.OpenFiles),
		Timeout:     unl(l.Timeout > 0, l.Timeout.String()),
		OutputBytes: size(l.OutputBytes),
		DiskBytes:   size(l.DiskBytes),
	}, nil
}

// YAML returns p as a YAML document (as `airlock policy show` prints it).
func (p *Policy) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
