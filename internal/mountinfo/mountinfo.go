// Package mountinfo reads what /proc/*/mountinfo says. It only parses: it
// must never mount, unmount or open anything but the file it is given.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo file (proc(5)), its paths unescaped.
type Mount struct {
	ID, Parent uint64
	Dev        string // the filesystem's device, "major:minor"
	Root       string // the path of the mounted tree's root within its filesystem
	Point      string // where it is mounted, relative to the reader's root
	Options    string // per-mount options: rw or ro, nosuid, nodev, ...
	FSType     string
	Source     string
	Super      string // the superblock's options (cgroup v1: its controllers)
}

// ReadOnly says whether the mount itself is read-only.
func (m Mount) ReadOnly() bool { return hasOption(m.Options, "ro") }

// HasSuperOption says whether the superblock options hold o (a cgroup v1
// hierarchy's controller, for example).
func (m Mount) HasSuperOption(o string) bool { return hasOption(m.Super, o) }

func hasOption(list, o string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// Under says whether the mount point is dir or below it.
func (m Mount) Under(dir string) bool {
	if dir == "/" {
		return true
	}
	return m.Point == dir || strings.HasPrefix(m.Point, dir+"/")
}

// ParseLine parses one mountinfo line.
func ParseLine(line string) (Mount, error) {
	left, right, ok := strings.Cut(line, " - ")
	if !ok {
		return Mount{}, fmt.Errorf("mountinfo line %q: no \" - \" separator", line)
	}
	lf, rf := strings.Fields(left), strings.Fields(right)
	if len(lf) < 6 || len(rf) < 2 {
		return Mount{}, fmt.Errorf("mountinfo line %q: too few fields", line)
	}
	id, err1 := strconv.ParseUint(lf[0], 10, 64)
	parent, err2 := strconv.ParseUint(lf[1], 10, 64)
	if err1 != nil || err2 != nil {
		return Mount{}, fmt.Errorf("mountinfo line %q: bad mount id", line)
	}
	m := Mount{ID: id, Parent: parent, Dev: lf[2], Root: Unescape(lf[3]), Point: Unescape(lf[4]), Options: lf[5],
		FSType: rf[0], Source: Unescape(rf[1])}
	if len(rf) > 2 {
		m.Super = rf[2]
	}
	return m, nil
}

// Parse reads every line of r.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		m, err := ParseLine(sc.Text())
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// Read parses a mountinfo file: "/proc/self/mountinfo", or another
// process's.
func Read(file string) ([]Mount, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Self parses /proc/self/mountinfo.
func Self() ([]Mount, error) { return Read("/proc/self/mountinfo") }

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
