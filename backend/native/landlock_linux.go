package native

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Landlock access rights (bit positions as in the kernel UAPI).
const (
	llExecute   uint64 = 1 << 0
	llWriteFile uint64 = 1 << 1
	llReadFile  uint64 = 1 << 2
	llReadDir   uint64 = 1 << 3
	llRemoveDir uint64 = 1 << 4
	llRemoveFil uint64 = 1 << 5
	llMakeChar  uint64 = 1 << 6
	llMakeDir   uint64 = 1 << 7
	llMakeReg   uint64 = 1 << 8
	llMakeSock  uint64 = 1 << 9
	llMakeFifo  uint64 = 1 << 10
	llMakeBlock uint64 = 1 << 11
	llMakeSym   uint64 = 1 << 12
	llRefer     uint64 = 1 << 13
	llTruncate  uint64 = 1 << 14
	llIoctlDev  uint64 = 1 << 15

	llRead      = llReadFile | llReadDir
	llReadExec  = llRead | llExecute
	llReadWrite = llReadExec | llWriteFile | llRemoveDir | llRemoveFil | llMakeChar |
		llMakeDir | llMakeReg | llMakeSock | llMakeFifo | llMakeBlock | llMakeSym |
		llRefer | llTruncate | llIoctlDev
	// llMediated is what a host-backed writable bind grants directly:
	// reading, executing and removing. Writing, creating, renaming,
	// linking and truncating go through the host's write mediator.
	llMediated = llReadExec | llRemoveDir | llRemoveFil | llIoctlDev
	// llFileRights are the rights that apply to a non-directory.
	llFileRights = llExecute | llWriteFile | llReadFile | llTruncate | llIoctlDev
	// llDevRights are what terminal and other device nodes need.
	llDevRights = llReadFile | llWriteFile | llTruncate | llIoctlDev | llReadDir
)

// devNodes are the host device nodes bound into the sandbox's /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// llRule grants Access beneath Path (a path inside the sandbox). With
// Children it grants it beneath each entry of Path instead (not Path
// itself: nothing may be created or renamed directly in it), splitting
// any entry that holds one of Except (directories that must not inherit
// the right: a write right on an ancestor of a mediated mount would let
// a write the mediator continued land there). The init expands it once
// the root is built, before anything untrusted runs; symlinks are
// skipped (a rule on one would land on its target).
type llRule struct {
	Access   uint64   `json:"a"`
	Path     string   `json:"p"`
	Children bool     `json:"c,omitempty"`
	Except   []string `json:"x,omitempty"`
}

// expandRules replaces Children rules with rules on the entries they
// cover.
func expandRules(rules []llRule) ([]llRule, error) {
	var out []llRule
	for _, r := range rules {
		if !r.Children {
			out = append(out, r)
			continue
		}
		sub, err := childRules(r.Path, r.Access, r.Except)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

func childRules(dir string, access uint64, except []string) ([]llRule, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("landlock: list %s: %w", dir, err)
	}
	var out []llRule
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 || slices.Contains(except, p) {
			continue
		}
		holds := false
		for _, x := range except {
			if strings.HasPrefix(x, p+"/") {
				holds = true
			}
		}
		switch {
		case holds && e.IsDir():
			sub, err := childRules(p, access, except)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		case holds:
			// A non-directory cannot hold a mount point.
		case e.IsDir():
			out = append(out, llRule{Access: access, Path: p})
		default:
			out = append(out, llRule{Access: access & llFileRights, Path: p})
		}
	}
	return out, nil
}

// landlockABI returns the kernel's Landlock ABI version (0: none).
func landlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// applyLandlock restricts every thread of this process to rules, using the
// best ABI the kernel has (rights it does not know are dropped; with no
// Landlock at all the host has already failed closed or opted to degrade).
func applyLandlock(rules []llRule) error {
	rules, err := expandRules(rules)
	if err != nil {
		return err
	}
	byAccess := map[uint64][]string{}
	for _, r := range rules {
		byAccess[r.Access] = append(byAccess[r.Access], r.Path)
	}
	keys := make([]uint64, 0, len(byAccess))
	for k := range byAccess {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	opts := make([]landlock.Rule, 0, len(keys)+1)
	for _, k := range keys {
		opts = append(opts, landlock.PathAccess(landlock.AccessFSSet(k), byAccess[k]...).IgnoreIfMissing())
	}
	if err := landlock.V7.BestEffort().RestrictPaths(opts...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}
