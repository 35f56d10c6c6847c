package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot is the directory holding go.mod, above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// goFiles parses every non-test Go file of the module (all build tags,
// testdata included: programs there run too), keyed by slash path
// relative to the module root.
func goFiles(t *testing.T) (map[string]*ast.File, *token.FileSet) {
	t.Helper()
	root := moduleRoot(t)
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, fset
}

// Every package starts with a doc comment saying what it is for
// ("Package x ..." or, for a program, "Command x ..."): STYLE.md rule 1.
func TestPackageDocs(t *testing.T) {
	files, _ := goFiles(t)
	type pkg struct {
		name string
		doc  bool
	}
	pkgs := map[string]*pkg{}
	for p, f := range files {
		dir := filepath.ToSlash(filepath.Dir(p))
		k := pkgs[dir]
		if k == nil {
			k = &pkg{name: f.Name.Name}
			pkgs[dir] = k
		}
		if f.Doc == nil {
			continue
		}
		text := f.Doc.Text()
		want := "Package " + f.Name.Name + " "
		if f.Name.Name == "main" {
			want = "Command "
		}
		if strings.HasPrefix(text, want) {
			k.doc = true
		}
	}
	var missing []string
	for dir, k := range pkgs {
		if !k.doc {
			missing = append(missing, dir+" (package "+k.name+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s has no doc comment starting \"Package %s ...\" (\"Command NAME ...\" for a program)", m, strings.TrimSuffix(strings.SplitN(m, "package ", 2)[1], ")"))
	}
}

// bannedOS are the os functions that touch a host path by name. A path a
// sandbox can influence must be opened through a root that cannot be left
// (os.Root, openat2, backend/internal/hostfs): STYLE.md rule 9.
var bannedOS = map[string]bool{
	"Open": true, "OpenFile": true, "Create": true, "ReadFile": true, "WriteFile": true,
	"Mkdir": true, "MkdirAll": true, "MkdirTemp": true, "CreateTemp": true, "ReadDir": true,
	"Remove": true, "RemoveAll": true, "Rename": true, "Symlink": true, "Link": true,
	"Chmod": true, "Chown": true, "Lchown": true, "Chtimes": true, "Truncate": true,
}

// hostPathHomes are the files and directories (ending in /) where raw
// host-path calls are allowed, each with why. Keep it short: a new entry
// needs a reason a reviewer accepts.
var hostPathHomes = map[string]string{
	// The one home of safe host-path code.
	"backend/internal/": "hostfs and cgroupfs are the home of host-path code the backends share",

	// Backends being rewritten; the raw calls move into backend/internal
	// with issue 12 item 3.
	"backend/native/":         "paths the backend makes itself (cgroups, state, the rootfs it assembles) before anything runs inside; moving to backend/internal/hostfs (issue 12, item 3)",
	"backend/gvisor/":         "the OCI bundle, cgroups and runsc state the backend makes itself; moving to backend/internal/hostfs (issue 12, item 3)",
	"backend/docker/":         "the sandbox's state dir the backend makes and removes itself (deny objects, injected files, overlay layers) and /proc/PID/cgroup of its container's init; the container's own files are dockerd's to write",
	"backend/native/oci/":     "the OCI runtime's state under --root, the bundle, cgroups and hook files containerd or dockerd name; paths inside a container's rootfs go through openat2 RESOLVE_IN_ROOT (mount_linux.go)",
	"backend/wasm/backend.go": "the backend's own compilation cache and temp dir, named by it",
	"backend/microvm/":        "the VM directories, cgroups, initramfs, templates and KVM verdict the backend makes under its own state and cache dirs; the host paths a policy shares are only stat'ed (plan) and served by QEMU's 9p server, read-only unless writable by policy",
	"internal/cpio/cpio.go":   "the files its caller names for an initramfs (the agent binary, kernel modules)",
	"backend/wasm/sandbox.go": "the sandbox's private scratch dir, made and removed by the backend; paths inside go through os.Root (mounts.go)",

	// Programs that run inside a sandbox: their paths are the sandbox's.
	"agent/serve_linux.go":               "the guest agent, inside the sandbox: /proc of its own namespace",
	"agent/peer_linux.go":                "the guest agent, inside the sandbox: /proc of its own namespaces, naming the program behind an egress connection",
	"internal/mountinfo/mountinfo.go":    "reads the /proc/PID/mountinfo file it is given, read-only; nothing else",
	"backend/microvm/guest/":             "the microVM's init, inside the guest: its initramfs and the sandbox root it builds",
	"backend/native/testdata/":           "an attack program run inside sandboxes",
	"backend/wasm/testdata/":             "a WASI guest run inside sandboxes",
	"sandbox/sandboxtest/helper/":        "the conformance helper, run inside sandboxes",
	"test/escape/attacks/":               "attack programs run inside sandboxes",
	"sandbox/sandboxtest/build.go":       "test support: builds the helper into its own temp dir",
	"sandbox/sandboxtest/files.go":       "test support: fixtures in the test's temp dirs on the test host",
	"sandbox/sandboxtest/leaks_linux.go": "test support: reads /proc and cgroups of the test host to find leaks",
	"sandbox/sandboxtest/suite.go":       "test support: places the helper into the test's own workspace",
	"internal/testutil/testutil.go":      "test support: the airlock binary built into its own temp dir",
	"internal/testutil/ocitest/":         "test support: containerd configs and image tarballs written into the caller's temp dir, the test images read from their cache",
	"internal/testutil/realserver/":      "test support: the seed repository written into the test's own temp dir",
	"internal/testutil/kubecluster/":     "test support: the test cluster's own temp dir, and the host state the kubelet changes (sysctls, /var/lib/kubelet, /var/log/pods, cgroups, /proc) recorded and restored",

	// Paths the operator or user named, or the host's own fixed ones.
	"internal/imageroot/":                    "image sandboxes' writable layers, one directory per sandbox under a base the backend names",
	"internal/fsutil/":                       "removal of trees airlock made itself (image layers, sandbox writable layers)",
	"images/":                                "the image store's own directory (named by the operator), where it names every file itself; layer contents are unpacked with openat2 beneath the layer (unpack_linux.go)",
	"bench/":                                 "benchmark tools writing result files the operator names",
	"cmd/airlock/image.go":                   "the -o file of image export, named by the user",
	"cmd/airlock/run.go":                     "the --audit and --result files the user names",
	"cmd/airlock/internal/sessclient/key.go": "the --policy file the user names, read for the session key",
	"cmd/airlock/internal/sessclient/client_linux.go": "the per-user session directory airlock makes (owner and mode checked)",
	"cmd/airlock/session_linux.go":                    "the session's own socket, lock and log in the per-user directory airlock makes (owner and mode checked)",
	"cmd/airlock/sandboxcmd.go":                       "the --policy file the user names",
	"cmd/airlock/oci_linux.go":                        "the --log file containerd or dockerd names for the runtime",
	"cmd/airlock/mcp.go":                              "the embedded server's own temp directory and socket, made by it",
	"cmd/airlock/runhost.go":                          "airlock's own cache store under the user's cache directory, and the user's git config read for the identity only",
	"cmd/airlock/sandbox_cp.go":                       "the local side of cp, named by the user; names from a sandbox are extracted through os.Root",
	"cmd/airlock/serve.go":                            "the socket and data directory the operator names",
	"cmd/airlock/serve_lock_unix.go":                  "the data directory's lock file the operator names (--data)",
	"cmd/airlock/serve_lock_other.go":                 "the data directory the operator names (--data)",
	"cmd/airlock/serve_e2b.go":                        "the E2B adapter's own /v1 socket in the server's run directory",
	"cmd/airlock/serve_cgroup_linux.go":               "the server's own cgroup parents, found through /proc/self",
	"policy/load.go":                                  "the policy file the user names",
	"egress/env.go":                                   "the host's CA bundle at its fixed system paths",
	"server/diskfiles.go":                             "upload spools and buffered exec output: unlinked temp files the server makes in a sandbox volume's root (outside its workspace) or the data directory",
	"server/admission/ceiling.go":                     "the ceilings file the operator names",
	"server/disk.go":                                  "a sandbox's volume and workspace under the data directory, named by the ID the server made",
	"internal/volume/":                                "the volume images and mount points the server makes below its data directory, named by it",
	"server/images.go":                                "uploads (archives, images) spooled in the server's data directory under names it makes",
	"server/server.go":                                "the server's data directory (workspaces), named by the operator",
	"server/store/store.go":                           "the store's directory, named by the operator",
	"server/checkpoint.go":                            "a sandbox's workspace and its rollback siblings, at paths the server made (RemoveAll and Rename never follow links inside)",
	"server/objstore/manifest.go":                     "manifests the server writes in its own checkpoint directory (the workspace itself is walked through os.Root)",
	"server/objstore/objects.go":                      "the content-addressed checkpoint objects, named by their sha256 in the server's directory",
	"server/snapshot.go":                              "a snapshot's files under the data directory, named by the ID the server made (the copy itself opens every name relative to its parent, O_NOFOLLOW: clone_linux.go)",
	"server/pause.go":                                 "a paused sandbox's files under the data directory, named by the ID the server made",
	"server/objstore/tree_linux.go":                   "owner shifts of a stopped sandbox's workspace (Lstat/Lchown, no process runs); restores go through os.Root",
	"server/token/token.go":                           "the port-token key in the server's data directory, a name it makes",
	"server/volumes.go":                               "named volumes' images under the data directory, named by IDs the server made",
}

// homeOf returns the allow-list entry covering file p ("" when none).
func homeOf(p string) string {
	if _, ok := hostPathHomes[p]; ok {
		return p
	}
	best := ""
	for k := range hostPathHomes {
		if strings.HasSuffix(k, "/") && strings.HasPrefix(p, k) && len(k) > len(best) {
			best = k
		}
	}
	return best
}

// Raw host-path calls only in their allowed homes (STYLE.md rule 9), and
// no stale allowance.
func TestHostPathCallsHaveOneHome(t *testing.T) {
	files, fset := goFiles(t)
	used := map[string]bool{}
	var bad []string
	for p, f := range files {
		osName := ""
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "os" {
				osName = "os"
				if imp.Name != nil {
					osName = imp.Name.Name
				}
			}
		}
		if osName == "" || osName == "_" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); !ok || id.Name != osName || !bannedOS[sel.Sel.Name] {
				return true
			}
			if home := homeOf(p); home != "" {
				used[home] = true
				return true
			}
			bad = append(bad, fset.Position(call.Pos()).String()+": os."+sel.Sel.Name)
			return true
		})
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: a raw host-path call outside its homes (open it through os.Root or backend/internal/hostfs, or add the file to hostPathHomes with why)", b)
	}
	for home := range hostPathHomes {
		if !used[home] {
			t.Errorf("hostPathHomes[%q]: no raw host-path call there any more; remove the allowance", home)
		}
	}
}
