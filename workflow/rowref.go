package workflow

import (
	"fmt"
	"strings"
)

// PinRow returns the row reference of one version of a directory row,
// KEY@inv_ID, for RowTool and RowTask: the workflow then runs exactly that
// version, whoever dispatched a newer one (SPEC section 16).
func PinRow(key, invID string) string { return key + "@" + invID }

// ParseRowRef splits a row reference (a tool's or task's `row:`) into the
// row's key and the pinned version's inv_ID ("" when the reference names
// the row's current version: `row: KEY`).
func ParseRowRef(ref string) (key, invID string, err error) {
	key, invID, pinned := strings.Cut(ref, "@")
	if key == "" {
		return "", "", fmt.Errorf("row %q names no key: use row: KEY or row: KEY@inv_ID", ref)
	}
	if pinned && !validInvID(invID) {
		return "", "", fmt.Errorf("row %q pins %q, which is not an inv_ID (inv_ and 26 ULID characters, as in a receipt)", ref, invID)
	}
	return key, invID, nil
}

// validInvID reports whether s is "inv_" and a 26-character ULID.
func validInvID(s string) bool {
	u, ok := strings.CutPrefix(s, "inv_")
	if !ok || len(u) != 26 {
		return false
	}
	for _, c := range u {
		if !strings.ContainsRune("0123456789ABCDEFGHJKMNPQRSTVWXYZ", c) {
			return false
		}
	}
	return true
}
