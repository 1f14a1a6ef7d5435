//go:build unix && !linux

package runner

// closeRangeCloexec has no single call to use here.
func closeRangeCloexec() bool { return false }
