//go:build unix

package runner

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// guardShell is the program of the group guard; guardScript its script:
// it learns the group id on its first line, then waits for the end of its
// standard input, which comes when the server closes the pipe or dies,
// and kills the group. A server that finishes an execution kills its
// guard first, so only a server's death lets a guard fire.
const (
	guardShell  = "/bin/sh"
	guardScript = `read g || exit 0; read x; kill -s KILL -- "-$g" 2>/dev/null`
)

// groupGuard is the process that kills an execution's process group when
// the server dies without doing so: the kernel kills only the command
// itself then (PR_SET_PDEATHSIG), while what it started (its children,
// the server's grandchildren) would live on. The guard is in a process
// group of its own, not the command's, and holds only the read end of a
// pipe whose write end only the server holds (close-on-exec).
type groupGuard struct {
	cmd *exec.Cmd
	w   *os.File
}

// startGuard starts a guard, before the command starts, so that no
// moment of the command's life is unguarded; nil when none could start
// (no /bin/sh): the command then runs as before, its children unguarded.
func startGuard() *groupGuard {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	cmd := &exec.Cmd{
		Path:        guardShell,
		Args:        []string{"sh", "-c", guardScript},
		Env:         []string{"PATH=/usr/bin:/bin"},
		Dir:         "/",
		Stdin:       r,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil
	}
	return &groupGuard{cmd: cmd, w: w}
}

// arm tells the guard the group to kill.
func (g *groupGuard) arm(pgid int) {
	if g != nil {
		_, _ = g.w.WriteString(strconv.Itoa(pgid) + "\n")
	}
}

// stop ends the guard without it firing: the server has killed the
// group itself.
func (g *groupGuard) stop() {
	if g == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
	g.w.Close()
}
