package policy

import (
	"encoding/json"
	"strconv"
)

// MarshalJSON writes d as a duration string ("4h"), as the HTTP API does,
// so that a policy read back from the API is valid policy input.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string ("30s") or, for Go clients that
// marshalled a time.Duration, a non-negative number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := ParseDuration(s)
		if err != nil {
			return err
		}
		*d = v
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 {
		return invalidf("want a duration string such as \"30s\", got %s", b)
	}
	*d = Duration(n)
	return nil
}

// UnmarshalJSON reads a size as a number of bytes or a string ("512Mi").
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		v, err := ParseByteSize(s)
		if err != nil {
			return err
		}
		*b = v
		return nil
	}
	n, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil || n < 0 {
		return invalidf("want a size in bytes or a string such as \"512Mi\", got %s", data)
	}
	*b = ByteSize(n)
	return nil
}

// MarshalJSON writes every limit, 0 for none: an omitted limit would be
// inherited from the profile when the JSON is read back as a policy,
// while an explicit 0 means "no limit".
func (l Limits) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Memory      ByteSize `json:"memory"`
		CPUs        float64  `json:"cpus"`
		Pids        int      `json:"pids"`
		OpenFiles   int      `json:"open_files"`
		Timeout     Duration `json:"timeout"`
		OutputBytes ByteSize `json:"output_bytes"`
		DiskBytes   ByteSize `json:"disk"`
	}{l.Memory, l.CPUs, l.Pids, l.OpenFiles, l.Timeout, l.OutputBytes, l.DiskBytes})
}
