package runner

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultDir is the parent of the working directories when Options.Dir
// is "": a directory of the server's user that no one else can create
// first — $XDG_RUNTIME_DIR/asmp-exec, else the user's cache directory
// (os.UserCacheDir) /asmp/exec, else $TMPDIR/asmp-exec-UID.
func DefaultDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "asmp-exec")
	}
	if d, err := os.UserCacheDir(); err == nil && filepath.IsAbs(d) {
		return filepath.Join(d, "asmp", "exec")
	}
	return filepath.Join(os.TempDir(), "asmp-exec-"+strconv.Itoa(os.Getuid()))
}

// Working directories are named run.PID.RANDOM: at start, those of a PID
// that no longer runs were left by executions that died with their
// server, and are removed (sweep).
const runPrefix = "run."

// runName returns a fresh working directory name of this process.
func runName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return runPrefix + strconv.Itoa(os.Getpid()) + "." + hex.EncodeToString(b[:])
}

// leftOver reports whether name is a working directory of a process that
// no longer runs.
func leftOver(name string) bool {
	rest, ok := strings.CutPrefix(name, runPrefix)
	if !ok {
		return false
	}
	pid, _, ok := strings.Cut(rest, ".")
	n, err := strconv.Atoi(pid)
	return ok && err == nil && n > 0 && n != os.Getpid() && !alive(n)
}

// sweep removes the working directories left by executions that died
// with their server, and returns how many it removed.
func (e *Executor) sweep() int {
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, de := range entries {
		if de.IsDir() && leftOver(de.Name()) {
			e.removeAll(filepath.Join(e.dir, de.Name()))
			n++
		}
	}
	return n
}
