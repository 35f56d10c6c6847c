package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/sandbox"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// mergeEnv returns base with extra's entries added, later keys winning.
func mergeEnv(base, extra []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(extra))
	for _, list := range [][]string{base, extra} {
		for _, kv := range list {
			k := kv[:strings.IndexByte(kv, '=')]
			if i, ok := idx[k]; ok {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

func envValue(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if strings.HasPrefix(env[i], key+"=") {
			return env[i][len(key)+1:], true
		}
	}
	return "", false
}

// lookPath finds the executable for name like execvp would with the
// process's PATH, relative names resolved against dir.
func lookPath(name, pathEnv string, set bool, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("command %q: %w", name, commandKind(err))
		}
		return p, nil
	}
	if !set {
		pathEnv = defaultPath
	}
	var permErr error
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if errors.Is(err, sandbox.ErrPermission) && permErr == nil {
			permErr = fmt.Errorf("command %q: %w", name, commandKind(err))
		}
	}
	if permErr != nil {
		return "", permErr
	}
	return "", fmt.Errorf("command %q not found in PATH: %w", name, sandbox.ErrCommandNotFound)
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return errnoKind(err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory: %w", p, sandbox.ErrPermission)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable: %w", p, sandbox.ErrPermission)
	}
	return nil
}
