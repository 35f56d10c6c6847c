package oci

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/policy"
)

// Annotations a container's config.json may carry to pick its Airlock
// policy, among what the operator allows.
const (
	AnnotationProfile = "airlock.dev/profile"
	AnnotationPolicy  = "airlock.dev/policy"
)

// DefaultOperatorConfig is where the operator's runtime configuration
// lives; $AIRLOCK_OCI_CONFIG overrides it (containerd and dockerd pass
// their environment to the runtime through the shim).
const DefaultOperatorConfig = "/etc/airlock/oci.yaml"

// OperatorConfigEnv names the variable that overrides DefaultOperatorConfig.
const OperatorConfigEnv = "AIRLOCK_OCI_CONFIG"

// OperatorConfig is the operator's ceiling for every container the runtime
// starts: which policies annotations may choose, and the capabilities no
// container gets beyond. Containers never widen it: an annotation names a
// profile or policy the operator listed, never a file.
type OperatorConfig struct {
	// Profile is the built-in profile (or, with Policy, nothing) used when
	// a container names none. Default "default".
	Profile string `yaml:"profile"`
	// Policy names one of Policies used when a container names none; it
	// wins over Profile.
	Policy string `yaml:"policy"`
	// Profiles are the built-in profiles airlock.dev/profile may name.
	// Nil: all of them.
	Profiles []string `yaml:"profiles"`
	// Policies are the policy files airlock.dev/policy may name, by name.
	Policies map[string]string `yaml:"policies"`
	// Capabilities is the capability ceiling (names as in config.json,
	// CAP_ prefix optional). Nil: DefaultCapabilities. Capabilities in
	// neverGranted are refused here.
	Capabilities []string `yaml:"capabilities"`

	file string
	caps map[int]bool
}

// maxOperatorFile bounds the operator's file.
const maxOperatorFile = 1 << 20

// LoadOperatorConfig reads the operator's configuration from path, or
// from $AIRLOCK_OCI_CONFIG, or DefaultOperatorConfig when path is "". A
// missing default file means the built-in ceiling; a missing named file is
// an error.
func LoadOperatorConfig(path string) (*OperatorConfig, error) {
	named := path != ""
	if path == "" {
		path = os.Getenv(OperatorConfigEnv)
		named = path != ""
	}
	if path == "" {
		path = DefaultOperatorConfig
	}
	f, err := os.Open(path)
	if err != nil {
		if !named && errors.Is(err, os.ErrNotExist) {
			return ParseOperatorConfig("", nil)
		}
		return nil, fmt.Errorf("operator config %s: %w", path, errdefs.ErrInvalid)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxOperatorFile+1))
	if err != nil {
		return nil, fmt.Errorf("operator config %s: %v: %w", path, err, errdefs.ErrInvalid)
	}
	if len(data) > maxOperatorFile {
		return nil, fmt.Errorf("operator config %s: larger than %d bytes: %w", path, maxOperatorFile, errdefs.ErrInvalid)
	}
	return ParseOperatorConfig(path, data)
}

// ParseOperatorConfig parses the operator's YAML (unknown fields are
// errors) and checks it: every profile and policy named exists and every
// capability may be granted. name is used in errors.
func ParseOperatorConfig(name string, data []byte) (*OperatorConfig, error) {
	c := &OperatorConfig{file: name}
	if len(bytes.TrimSpace(data)) > 0 {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(c); err != nil {
			return nil, fmt.Errorf("operator config %s: %v: %w", name, err, errdefs.ErrInvalid)
		}
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("operator config %s: "+format+": %w", append(append([]any{name}, args...), errdefs.ErrInvalid)...)
	}
	if c.Profiles == nil {
		c.Profiles = policy.Profiles()
	}
	for _, p := range c.Profiles {
		if !slices.Contains(policy.Profiles(), p) {
			return nil, bad("profiles: unknown profile %q (known: %s)", p, strings.Join(policy.Profiles(), ", "))
		}
	}
	if c.Profile == "" {
		c.Profile = "default"
	}
	if !slices.Contains(policy.Profiles(), c.Profile) {
		return nil, bad("profile: unknown profile %q (known: %s)", c.Profile, strings.Join(policy.Profiles(), ", "))
	}
	for n, f := range c.Policies {
		if n == "" || !filepath.IsAbs(f) {
			return nil, bad("policies: %q: the file must be an absolute path, got %q", n, f)
		}
	}
	if c.Policy != "" {
		if _, ok := c.Policies[c.Policy]; !ok {
			return nil, bad("policy: %q is not one of policies", c.Policy)
		}
	}
	names := c.Capabilities
	if names == nil {
		names = DefaultCapabilities
	}
	caps, err := capSet(names)
	if err != nil {
		return nil, bad("capabilities: %v", err)
	}
	for n := range caps {
		if why, ok := neverGranted[n]; ok {
			return nil, bad("capabilities: %s is never granted (%s)", capName(n), why)
		}
	}
	c.caps = caps
	return c, nil
}

// CapabilityCeiling returns the ceiling's capability numbers, sorted.
func (c *OperatorConfig) CapabilityCeiling() []int {
	out := make([]int, 0, len(c.caps))
	for n := range c.caps {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// choosePolicy returns the Airlock policy a container's annotations pick
// (or the operator's default) and its name for logs. Annotations may only
// name what the operator listed.
func (c *OperatorConfig) choosePolicy(ann map[string]string) (*policy.Policy, string, error) {
	prof, hasProf := ann[AnnotationProfile]
	pol, hasPol := ann[AnnotationPolicy]
	switch {
	case hasProf && hasPol:
		return nil, "", fmt.Errorf("annotations %s and %s: name one, not both: %w", AnnotationProfile, AnnotationPolicy, errdefs.ErrInvalid)
	case hasPol:
		return c.loadPolicy(pol, "annotation "+AnnotationPolicy)
	case hasProf:
		if !slices.Contains(c.Profiles, prof) {
			return nil, "", fmt.Errorf("annotation %s: profile %q is not allowed by the operator (allowed: %s): %w",
				AnnotationProfile, prof, strings.Join(c.Profiles, ", "), errdefs.ErrInvalid)
		}
		p, err := policy.Profile(prof)
		return p, "profile " + prof, err
	case c.Policy != "":
		return c.loadPolicy(c.Policy, "operator policy")
	}
	p, err := policy.Profile(c.Profile)
	return p, "profile " + c.Profile, err
}

func (c *OperatorConfig) loadPolicy(name, what string) (*policy.Policy, string, error) {
	file, ok := c.Policies[name]
	if !ok {
		known := make([]string, 0, len(c.Policies))
		for n := range c.Policies {
			known = append(known, n)
		}
		sort.Strings(known)
		return nil, "", fmt.Errorf("%s: policy %q is not one the operator allows (allowed: %s): %w",
			what, name, strings.Join(known, ", "), errdefs.ErrInvalid)
	}
	p, err := policy.LoadFile(file)
	if err != nil {
		return nil, "", fmt.Errorf("%s %q: %w", what, name, err)
	}
	return p, "policy " + name, nil
}
