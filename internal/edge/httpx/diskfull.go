package httpx

import (
	"errors"
	"strings"
	"syscall"

	"github.com/asmp-dev/asmp/protocol"
)

// DiskFull reports whether err says the storage is out of space: ENOSPC
// (or EDQUOT) from the system, SQLite's SQLITE_FULL, or PostgreSQL's
// class 53 disk_full (SQLSTATE 53100).
func DiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) && pg.SQLState() == "53100" {
		return true
	}
	return strings.Contains(err.Error(), "database or disk is full")
}

// diskFull is the 507 answer of a server fault that is a full disk: the
// request was not applied, and retrying once space is freed will work.
func diskFull(err error) error {
	return &protocol.Error{Code: protocol.EInsufficientStorage, Err: err,
		Hint: "The server's disk is full: nothing of this request was stored. Retry once the operator has freed space (GET /readyz says when writes work again)."}
}
