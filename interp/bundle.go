package interp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Bundle is one displayed object in every representation the kernel
// gave: "text", "html", "markdown", "svg", "latex", "javascript" (strings),
// "png" and "jpeg" (base64 of an image of that type), "json" and "chart"
// (JSON values: chart is the data of a matplotlib figure in E2B's chart
// shapes). Whatever else a kernel sends is dropped.
type Bundle map[string]json.RawMessage

var (
	textKeys  = []string{"text", "html", "markdown", "svg", "latex", "javascript"}
	jpegMagic = []byte{0xff, 0xd8, 0xff}
)

// checked keeps the entries of b whose key is known and whose value has
// the type the key promises; an image must decode to its format's magic.
func (b Bundle) checked() Bundle {
	if len(b) == 0 {
		return nil
	}
	out := Bundle{}
	for k, v := range b {
		switch {
		case contains(textKeys, k):
			var s string
			if json.Unmarshal(v, &s) == nil {
				out[k] = v
			}
		case k == "png" || k == "jpeg":
			var s string
			if json.Unmarshal(v, &s) != nil {
				continue
			}
			head, err := base64.StdEncoding.DecodeString(s[:min(len(s), 16)])
			magic := pngMagic
			if k == "jpeg" {
				magic = jpegMagic
			}
			if err == nil && bytes.HasPrefix(head, magic) {
				out[k] = v
			}
		case k == "json" || k == "chart":
			if json.Valid(v) && !strings.HasPrefix(strings.TrimSpace(string(v)), "null") {
				out[k] = v
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
