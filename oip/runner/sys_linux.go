//go:build linux

package runner

import (
	"syscall"
	"unsafe"
)

// supported reports whether commands can run here.
const supported = true

// sysProcAttr puts the command in its own process group, so the whole
// group can be killed, and has the kernel kill it if the server dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitExit blocks until the child pid has exited without reaping it
// (waitid with WNOWAIT), so its pid, and with it the process group id,
// cannot be reused before the group is killed. It reports whether it
// waited; on false the caller kills the group after reaping instead.
func waitExit(pid int) bool {
	const (
		pPID    = 1         // P_PID
		wExited = 0x4       // WEXITED
		wNoWait = 0x1000000 // WNOWAIT
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		switch errno {
		case 0:
			return true
		case syscall.EINTR:
			continue
		default:
			return false
		}
	}
}

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
