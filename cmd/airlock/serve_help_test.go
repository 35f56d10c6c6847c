package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// Every doc `airlock serve --help` cites exists (issue 24 item 13).
func TestServeHelpCitesDocsThatExist(t *testing.T) {
	cmd := exec.Command(testutil.AirlockBinary(t), "serve", "--help")
	b, _ := cmd.CombinedOutput()
	errOut := string(b)
	docs := regexp.MustCompile(`docs/[A-Za-z0-9_./-]+\.md`).FindAllString(errOut, -1)
	if len(docs) == 0 {
		t.Fatalf("serve --help cites no doc: %q", errOut)
	}
	for _, d := range docs {
		if _, err := os.Stat(filepath.Join("..", "..", d)); err != nil {
			t.Errorf("serve --help cites %s: %v", d, err)
		}
	}
}
