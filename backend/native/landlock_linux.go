package native

import (
	"fmt"
	"sort"

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

// llRule grants Access beneath Path (a path inside the sandbox).
type llRule struct {
	Access uint64 `json:"a"`
	Path   string `json:"p"`
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
