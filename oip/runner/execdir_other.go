//go:build !unix

package runner

import (
	"fmt"
	"os"
	"path/filepath"
)

// openDir creates dir when missing and opens it.
func openDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	return os.Open(dir)
}

// mkRunDir creates a fresh working directory.
func (e *Executor) mkRunDir() (string, error) {
	p := filepath.Join(e.dir, runName())
	return p, os.Mkdir(p, 0o700)
}

// alive is true: without signals, nothing is taken for left over.
func alive(pid int) bool { return true }
