//go:build unix && !linux

package runner

import "syscall"

// supported reports whether commands can run here.
const supported = true

// sysProcAttr puts the command in its own process group, so the whole
// group can be killed.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitExit is not available here: the caller kills the group after
// reaping the child.
func waitExit(int) bool { return false }

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
