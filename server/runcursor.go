package server

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// The cursor of a run list (GET /runs) is opaque to clients: the
// unpadded base64url of "r1:" + the last listed run's updated_at in Unix
// nanoseconds + ":" + its run_id. The version tag lets the format change
// without old cursors being misread.
const runCursorTag = "r1:"

// encodeRunCursor returns the opaque cursor of position c.
func encodeRunCursor(c store.RunCursor) string {
	raw := runCursorTag + strconv.FormatInt(c.UpdatedAt.UnixNano(), 10) + ":" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// errBadRunCursor is every way a cursor can fail to decode.
var errBadRunCursor = errors.New("not a cursor of this list")

// decodeRunCursor reads a cursor made by encodeRunCursor.
func decodeRunCursor(s string) (store.RunCursor, error) {
	if len(s) > 256 {
		return store.RunCursor{}, errBadRunCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.RunCursor{}, errBadRunCursor
	}
	rest, ok := strings.CutPrefix(string(b), runCursorTag)
	if !ok {
		return store.RunCursor{}, errBadRunCursor
	}
	ns, id, ok := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || n <= 0 || id == "" || !validCursorID(id) {
		return store.RunCursor{}, errBadRunCursor
	}
	return store.RunCursor{UpdatedAt: time.Unix(0, n).UTC(), ID: id}, nil
}

// validCursorID accepts what run ids are made of (UUIDs: hex and dashes,
// with some slack for ids chosen by embedders).
func validCursorID(id string) bool {
	if len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
