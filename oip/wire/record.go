package wire

import "encoding/json"

// Record types the ledger holds.
const (
	TypeDirectoryRow     = "directory_row"     // a CLI directory row (SPEC section 8)
	TypeInvocation       = "invocation"        // an invocation of a row (SPEC section 9)
	TypeInvocationResult = "invocation_result" // the outcome of an executed invocation
)

// TimeFormat is the layout of every ledger timestamp: RFC 3339, UTC, whole
// seconds, "Z" (for example 2023-10-27T10:00:00Z).
const TimeFormat = "2006-01-02T15:04:05Z"

// Receipt statuses and the success message.
const (
	StatusSuccess  = "success"
	StatusError    = "error"
	SuccessMessage = "Object dispatched to ledger."
)

// Outcome classes.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeRefused   = "refused"
)

// Record is one immutable ledger entry as the API serves it.
//
// Its entry_hash is the hex SHA-256 of the record's canonical JSON (see
// oip/verify.CanonicalJSON), and the same canonical bytes are the record's
// leaf in the ledger's RFC 6962 Merkle tree. ReplayedBy is computed when the
// record is read and is not part of the hashed content.
type Record struct {
	InvID     string          `json:"inv_ID"`
	Seq       int64           `json:"seq"`
	Key       string          `json:"key"`
	Type      string          `json:"type"`
	Body      json.RawMessage `json:"body"`
	Timestamp string          `json:"timestamp"` // TimeFormat
	Source    string          `json:"source"`    // the principal's name, never a secret
	EntryHash string          `json:"entry_hash"`
	// Supersedes is the inv_ID of the key's previous record, "" for the
	// key's first one. It is always serialised: as null when "".
	Supersedes string `json:"-"`
	// ResultOf, on an invocation_result, is the attempt's inv_ID.
	ResultOf string `json:"result_of,omitempty"`
	// ReplayOf, on an invocation, names the invocation it replays.
	ReplayOf string `json:"replay_of,omitempty"`
	// ReplayedBy lists the inv_IDs of the invocations whose replay_of is
	// this record, oldest first. Computed on read; nil (and omitted from
	// the JSON) when not computed, [] when computed and empty.
	ReplayedBy []string `json:"replayed_by,omitzero"`
	// ReplayedByMore is set when more invocations replay this record than
	// ReplayedBy lists (it holds the oldest MaxReplayedBy): a read stays
	// bounded however often a record is replayed.
	ReplayedByMore bool `json:"replayed_by_more,omitempty"`
}

// MaxReplayedBy is how many inv_IDs a record's replayed_by lists at most.
const MaxReplayedBy = 100

// recordJSON is Record's wire shape, with supersedes as a nullable string.
type recordJSON struct {
	InvID      string          `json:"inv_ID"`
	Seq        int64           `json:"seq"`
	Key        string          `json:"key"`
	Type       string          `json:"type"`
	Body       json.RawMessage `json:"body"`
	Timestamp  string          `json:"timestamp"`
	Source     string          `json:"source"`
	EntryHash  string          `json:"entry_hash"`
	Supersedes *string         `json:"supersedes"`
	ResultOf   string          `json:"result_of,omitempty"`
	ReplayOf   string          `json:"replay_of,omitempty"`
	ReplayedBy []string        `json:"replayed_by,omitzero"`
	More       bool            `json:"replayed_by_more,omitempty"`
}

// MarshalJSON writes the record with supersedes as a string or null.
func (r Record) MarshalJSON() ([]byte, error) {
	w := recordJSON{
		InvID: r.InvID, Seq: r.Seq, Key: r.Key, Type: r.Type, Body: r.Body,
		Timestamp: r.Timestamp, Source: r.Source, EntryHash: r.EntryHash,
		ResultOf: r.ResultOf, ReplayOf: r.ReplayOf, ReplayedBy: r.ReplayedBy, More: r.ReplayedByMore,
	}
	if r.Supersedes != "" {
		s := r.Supersedes
		w.Supersedes = &s
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a record written by MarshalJSON (supersedes may be a
// string, null or absent).
func (r *Record) UnmarshalJSON(b []byte) error {
	var w recordJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Record{
		InvID: w.InvID, Seq: w.Seq, Key: w.Key, Type: w.Type, Body: w.Body,
		Timestamp: w.Timestamp, Source: w.Source, EntryHash: w.EntryHash,
		ResultOf: w.ResultOf, ReplayOf: w.ReplayOf, ReplayedBy: w.ReplayedBy, ReplayedByMore: w.More,
	}
	if w.Supersedes != nil {
		r.Supersedes = *w.Supersedes
	}
	return nil
}

// Receipt is the answer to a successful dispatch: the seed's receipt plus
// the record's seq, entry_hash and the inv_ID it supersedes.
type Receipt struct {
	InvID      string `json:"inv_ID"`
	Status     string `json:"status"`  // StatusSuccess
	Message    string `json:"message"` // SuccessMessage
	ObjectKey  string `json:"object_key"`
	Timestamp  string `json:"timestamp"` // TimeFormat
	Seq        int64  `json:"seq"`
	EntryHash  string `json:"entry_hash"`
	Supersedes string `json:"supersedes,omitempty"`
	// Outcome is set on receipts of invocations: refused, or the result of
	// an execution.
	Outcome *Outcome `json:"outcome,omitempty"`
	// Checkpoint and Proof are set when the receipt was asked for with
	// ?proof=true: the checkpoint stored with the record (the one it was
	// issued under) and the record's inclusion proof in its tree, so the
	// client keeps its own evidence.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	Proof      *Proof      `json:"proof,omitempty"`
}

// Outcome is what became of an invocation: refused before running, or the
// result of running it.
type Outcome struct {
	Class      string  `json:"class"`               // OutcomeSucceeded, OutcomeFailed or OutcomeRefused
	ExitCode   *int    `json:"exit_code,omitempty"` // absent when the command did not run
	DurationMS int64   `json:"duration_ms"`
	Stdout     *Stream `json:"stdout,omitempty"`
	Stderr     *Stream `json:"stderr,omitempty"`
	// Reason says why an invocation was refused (or failed to start).
	Reason string `json:"reason,omitempty"`
	// Output is the parsed stdout of a row with output_format json.
	Output json.RawMessage `json:"output,omitempty"`
}

// Stream is a captured output stream: its first bytes and its full size
// and SHA-256.
type Stream struct {
	Text      string `json:"text"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	Truncated bool   `json:"truncated,omitempty"`
}

// History is the answer of GET /api/dispatch?key=K&history=true.
type History struct {
	Key     string   `json:"key"`
	Records []Record `json:"records"` // oldest first
	// NextCursor continues the history after this page (pass it as
	// cursor); null on the last page.
	NextCursor *string `json:"next_cursor"`
}
