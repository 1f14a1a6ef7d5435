//go:build linux

package runner

import "golang.org/x/sys/unix"

// closeRangeCloexec marks fds 3 and up close-on-exec in one call (Linux
// 5.11+); false when the kernel lacks it.
func closeRangeCloexec() bool {
	return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil
}
