// Package mountinfo reads what /proc/*/mountinfo says. It only parses: it
// must never mount, unmount or open anything.
package mountinfo

import "strings"

// Unescape undoes mountinfo's octal escapes (\040 for a space, \011,
// \012, \134): a field as the kernel wrote it, back to the path.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			o := s[i+1 : i+4]
			if o[0] >= '0' && o[0] <= '3' && o[1] >= '0' && o[1] <= '7' && o[2] >= '0' && o[2] <= '7' {
				b.WriteByte((o[0]-'0')<<6 | (o[1]-'0')<<3 | (o[2] - '0'))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
