// Package proc reads a process's memory figures from /proc (Linux only),
// for the bench tools.
package proc

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// VmRSS returns the resident set size of process pid in kB, from the VmRSS
// line of /proc/PID/status.
func VmRSS(pid int) (int64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process id given")
	}
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
