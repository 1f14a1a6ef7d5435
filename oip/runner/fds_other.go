//go:build !unix

package runner

// closeOnExec has nothing to do where commands do not run.
func closeOnExec() {}
