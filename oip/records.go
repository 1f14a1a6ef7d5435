package oip

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

// RecordPage is one page of GET /api/ledger/records: records newest first.
type RecordPage struct {
	Records []Record `json:"records"`
	// NextCursor continues the list with older records; null on the last page.
	NextCursor *string `json:"next_cursor"`
}

// The cursor of the record list is opaque to clients: the unpadded
// base64url of "l1:" + the seq of the oldest record listed so far.
const recordCursorTag = "l1:"

func encodeRecordCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(recordCursorTag + strconv.FormatInt(seq, 10)))
}

func decodeRecordCursor(s string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(s) > 64 {
		return 0, false
	}
	v, ok := strings.CutPrefix(string(b), recordCursorTag)
	n, err := strconv.ParseInt(v, 10, 64)
	return n, ok && err == nil && n > 1
}

// Records returns up to limit records (0 or more than MaxPage: MaxPage)
// with seq < before (0: from the newest), newest first, each with
// replayed_by.
func (s *Service) Records(ctx context.Context, before int64, limit int) (RecordPage, error) {
	if limit <= 0 || limit > s.maxPage {
		limit = s.maxPage
	}
	if before <= 0 {
		size, err := s.st.LedgerSize(ctx)
		if err != nil {
			return RecordPage{}, fmt.Errorf("oip: ledger size: %w", err)
		}
		if err := s.shrunk(size); err != nil {
			return RecordPage{}, err
		}
		before = size + 1
	}
	from := max(1, before-int64(limit))
	srs, err := s.st.LedgerRange(ctx, from, before)
	if err != nil {
		return RecordPage{}, fmt.Errorf("oip: read records: %w", err)
	}
	page := RecordPage{Records: make([]Record, 0, len(srs))}
	for i := len(srs) - 1; i >= 0; i-- {
		r, err := s.checked(ctx, srs[i])
		if err != nil {
			return RecordPage{}, err
		}
		if r, err = s.withReplays(ctx, r); err != nil {
			return RecordPage{}, err
		}
		page.Records = append(page.Records, r)
	}
	if from > 1 {
		next := encodeRecordCursor(from)
		page.NextCursor = &next
	}
	return page, nil
}

func (s *Service) getRecords(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "cursor" && k != "limit" {
			return invalidf(k, "Unknown query parameter %q: GET /api/ledger/records takes cursor and limit.", protocol.Truncate(k, 64))
		}
	}
	limit, err := intParam(q, "limit")
	if err != nil {
		return err
	}
	if limit > int64(s.maxPage) {
		return invalidf("limit", "limit must be at most %d, not %d.", s.maxPage, limit)
	}
	var before int64
	if c := q.Get("cursor"); c != "" {
		var ok bool
		if before, ok = decodeRecordCursor(c); !ok {
			return invalidf("cursor", "cursor %q is not a cursor of this list: pass the next_cursor of the previous page unchanged, or leave it out to start from the newest record.", protocol.Truncate(c, 40))
		}
	}
	page, err := s.Records(r.Context(), before, int(limit))
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}
