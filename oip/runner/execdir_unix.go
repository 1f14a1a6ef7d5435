//go:build unix

package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// openDir creates dir (0700) when missing and opens it, refusing a
// symbolic link, a directory owned by another user, and one that group
// or others may write to: whoever could write there could swap a
// working directory for a link of their choosing.
func openDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s is a symbolic link or not a directory; give a real directory of this user", dir)
		}
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", dir, err)
	}
	if int(st.Uid) != os.Getuid() {
		f.Close()
		return nil, fmt.Errorf("%s is owned by uid %d, not by this server's user (uid %d): someone else could change what is in it; use a directory of your own", dir, st.Uid, os.Getuid())
	}
	if st.Mode&0o022 != 0 {
		f.Close()
		return nil, fmt.Errorf("%s is writable by group or others (mode %#o): make it 0700 (chmod 700 %s) or use another directory", dir, st.Mode&0o777, dir)
	}
	return f, nil
}

// mkRunDir creates a fresh working directory in the opened parent,
// relative to its descriptor: no link on the way is followed.
func (e *Executor) mkRunDir() (string, error) {
	for range 8 {
		name := runName()
		err := unix.Mkdirat(int(e.dirFile.Fd()), name, 0o700)
		if err == nil {
			return filepath.Join(e.dir, name), nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("mkdirat %s/%s: %w", e.dir, name, err)
		}
	}
	return "", fmt.Errorf("mkdirat in %s: names keep existing", e.dir)
}

// alive reports whether process pid runs.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
