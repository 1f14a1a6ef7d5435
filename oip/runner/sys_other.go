//go:build !unix

package runner

import "syscall"

// supported reports whether commands can run here.
const supported = false

// sysProcAttr has no process groups to offer here.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// waitExit is not available here.
func waitExit(int) bool { return false }

// killGroup cannot kill a group here; Execute refuses to run on such
// systems (see supported).
func killGroup(int) {}
