//go:build !unix

package sqlite

import "os"

// lockFile creates path; on this platform it takes no lock, and running
// two servers on one database is the operator's mistake to avoid.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
