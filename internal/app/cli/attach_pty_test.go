//go:build linux

package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// silentPTY is a pseudo-terminal whose far end never answers a terminal
// query, like CLRUN's PTY mode: whatever asmp writes is collected, and
// nothing but the test's own input comes back.
type silentPTY struct {
	master, slave *os.File
	mu            sync.Mutex
	out           bytes.Buffer
	done          chan struct{}
}

func ioctl(fd uintptr, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

func openSilentPTY(t *testing.T) *silentPTY {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var unlock int32
	if err := ioctl(m.Fd(), syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatal(err)
	}
	var n uint32
	if err := ioctl(m.Fd(), syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := struct{ row, col, x, y uint16 }{32, 100, 0, 0}
	if err := ioctl(s.Fd(), syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		t.Fatal(err)
	}
	p := &silentPTY{master: m, slave: s, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return // EIO once the last process on the slave is gone
			}
		}
	}()
	t.Cleanup(func() { m.Close(); s.Close() })
	return p
}

func (p *silentPTY) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the terminal shows want (or fails after a generous
// bound, so that a hang does not hang the suite).
func (p *silentPTY) waitFor(t *testing.T, cmd *exec.Cmd, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.output(), want) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the terminal never showed %q:\n%q", want, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start runs the binary on the PTY as a terminal session's foreground
// process, the way CLRUN and ssh start programs.
func (p *silentPTY) start(t *testing.T, env []string, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.slave, p.slave, p.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
	return cmd
}

var terminalQueries = []string{"\x1b]11;?", "\x1b]10;?", "\x1b[6n"}

func noQueries(t *testing.T, out string) {
	t.Helper()
	for _, q := range terminalQueries {
		if strings.Contains(out, q) {
			t.Fatalf("asmp queried the terminal (%q):\n%q", q, out)
		}
	}
}

// On a PTY that never answers (CLRUN's PTY mode), attach --plain writes no
// terminal query and loses no input: the answers are typed before the
// first prompt appears, and the wizard still runs through to DONE.
func TestAttachPlainOnSilentPTY(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	a := newAgent(t, bin)
	for _, term := range []string{"xterm-256color", "dumb"} {
		t.Run(term, func(t *testing.T) {
			p := openSilentPTY(t)
			env := append(a.env, "TERM="+term, "LANG=C.UTF-8") // and no CI, which would hide the query
			args := []string{"attach", url, "--workflow", "config-wizard-v1"}
			if term != "dumb" {
				args = append(args, "--plain")
			}
			cmd := p.start(t, env, bin, args...)
			if _, err := p.master.WriteString("1\nsave dark mode\ny\n"); err != nil {
				t.Fatal(err)
			}
			p.waitFor(t, cmd, "Run completed in state DONE")
			if err := cmd.Wait(); err != nil {
				t.Fatalf("attach: %v\n%q", err, p.output())
			}
			noQueries(t, p.output())
		})
	}
}

// The full-screen UI on the same silent PTY: no query either, and it
// answers the first key at once instead of after a query's timeout.
func TestAttachFullScreenOnSilentPTY(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	a := newAgent(t, bin)
	p := openSilentPTY(t)
	cmd := p.start(t, append(a.env, "TERM=xterm-256color", "LANG=C.UTF-8"), bin, "attach", url, "--workflow", "config-wizard-v1")
	p.waitFor(t, cmd, "Start wizard")
	if _, err := p.master.WriteString("1"); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, cmd, "Set value")
	if _, err := p.master.WriteString("\x03"); err != nil { // ctrl+c leaves
		t.Fatal(err)
	}
	p.waitFor(t, cmd, "attach again with --run")
	_ = cmd.Wait()
	noQueries(t, p.output())
}
