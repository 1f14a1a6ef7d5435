package httpx

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

type pgErr struct{ code string }

func (e pgErr) Error() string    { return "ERROR: could not extend file (SQLSTATE " + e.code + ")" }
func (e pgErr) SQLState() string { return e.code }

// Every backend's way of saying the disk is full is recognised; other
// faults are not.
func TestDiskFull(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("write: %w", syscall.ENOSPC),
		fmt.Errorf("commit: %w", errors.New("database or disk is full (13)")),
		fmt.Errorf("postgres: %w", pgErr{"53100"}),
	} {
		if !DiskFull(err) {
			t.Errorf("DiskFull(%v) = false", err)
		}
	}
	for _, err := range []error{nil, errors.New("connection refused"), pgErr{"40001"}} {
		if DiskFull(err) {
			t.Errorf("DiskFull(%v) = true", err)
		}
	}
}
