//go:build unix

package runner

import (
	"os"
	"strconv"
	"syscall"
)

// fdDir lists the process's open descriptors (Linux; the BSDs and macOS
// have /dev/fd).
var fdDir = func() string {
	if _, err := os.Stat("/proc/self/fd"); err == nil {
		return "/proc/self/fd"
	}
	return "/dev/fd"
}()

// closeOnExec marks every descriptor from 3 up close-on-exec, so that an
// executed program inherits fds 0-2 only. Go opens its own descriptors
// with O_CLOEXEC; this is for those it did not open: inherited from
// whoever started the server, or opened by C-like code without the flag.
// It runs before each start: descriptors come and go.
func closeOnExec() {
	if closeRangeCloexec() {
		return
	}
	d, err := os.Open(fdDir)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	own := int(d.Fd())
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd > 2 && fd != own {
			syscall.CloseOnExec(fd)
		}
	}
	d.Close()
}
