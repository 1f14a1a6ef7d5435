package oip

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/asmp-dev/asmp/protocol"
)

// Evidence returns the checkpoint the record seq (invID) was issued
// under, the one stored in its append's transaction, and its inclusion
// proof in that checkpoint's tree.
func (s *Service) Evidence(ctx context.Context, invID string, seq int64) (*Checkpoint, *Proof, error) {
	cks, err := s.st.LedgerCheckpoints(ctx, seq-1, 1)
	if err != nil {
		return nil, nil, fmt.Errorf("oip: read checkpoint: %w", err)
	}
	if len(cks) == 0 {
		err := checkpointFault("no stored checkpoint covers record seq %d", seq)
		s.tamper(err)
		return nil, nil, err
	}
	ck := wireCheckpoint(s.origin, cks[0])
	p, err := s.Proof(ctx, invID, ck.TreeSize)
	if err != nil {
		return nil, nil, err
	}
	return &ck, &p, nil
}

// withEvidence is a record's JSON with its checkpoint and proof added.
func withEvidence(rec Record, ck *Checkpoint, p *Proof) json.RawMessage {
	b, err := json.Marshal(rec)
	if err != nil || len(b) < 2 {
		return b
	}
	extra, err := json.Marshal(struct {
		Checkpoint *Checkpoint `json:"checkpoint"`
		Proof      *Proof      `json:"proof"`
	}{ck, p})
	if err != nil {
		return b
	}
	return append(append(b[:len(b)-1:len(b)-1], ','), extra[1:]...)
}

// boolParam parses an optional true/false query parameter (false when
// absent).
func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalidf(name, "%s must be true or false, not %q.", name, protocol.Truncate(v, 20))
	}
	return b, nil
}
