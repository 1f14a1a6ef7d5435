package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/asmp-dev/asmp/oip/wire"
	"github.com/asmp-dev/asmp/protocol"
)

// The OIP dispatch ledger lives under /api/ at the server's root, also when
// the client's base URL is a workflow-scoped API (…/w/{workflow_id}).

// apiURL returns the URL of an /api/ path at the server's root.
func (c *Client) apiURL(path string, q url.Values) string {
	root := *c.base
	if i := strings.LastIndex(root.Path, "/w/"); i >= 0 && !strings.Contains(root.Path[i+3:], "/") {
		root.Path = root.Path[:i]
	}
	u := strings.TrimRight(root.String(), "/") + "/api/" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// Dispatch appends body (a JSON object with a "type": "directory_row" or
// "invocation") to the ledger under key (POST /api/dispatch) and returns
// the receipt. Dispatching a key again supersedes its previous version
// (repair); the old record stays readable. Refusals are *Error with the
// server's hint (400 invalid object or key, 404 unknown row, 403 scope).
func (c *Client) Dispatch(ctx context.Context, key string, body any) (*wire.Receipt, error) {
	return c.dispatch(ctx, map[string]any{"key": key, "body": body})
}

// DispatchJSON sends a whole dispatch request as is: {"key": K, "body":
// {...}}, e.g. the contents of a dispatch file.
func (c *Client) DispatchJSON(ctx context.Context, request []byte) (*wire.Receipt, error) {
	if !json.Valid(request) {
		return nil, &Error{Status: http.StatusBadRequest, Code: protocol.EInvalid, Hint: `The dispatch request is not valid JSON; send {"key": K, "body": {"type": …}}.`}
	}
	return c.dispatch(ctx, json.RawMessage(request))
}

func (c *Client) dispatch(ctx context.Context, req any) (*wire.Receipt, error) {
	r, err := c.do(ctx, http.MethodPost, c.apiURL("dispatch", nil), req, nil)
	if err != nil {
		return nil, err
	}
	var rc wire.Receipt
	if err := decodeInto(r, &rc, "receipt"); err != nil {
		return nil, err
	}
	return &rc, nil
}

// Invocation is the body of an invocation of a directory row (SPEC
// section 9).
type Invocation struct {
	// ObjectKey is the key of the directory row to invoke (its current
	// version).
	ObjectKey string
	// Input is keyed by the row's arg and flag names.
	Input map[string]any
	// Execute asks the server to run the command (it must allow it) and to
	// answer with the outcome.
	Execute bool
	// ReplayOf names an earlier invocation's inv_ID that this one replays.
	ReplayOf string
}

// Invoke records an invocation of a directory row under the invocation's
// own key (e.g. "build-1234"; never the row's key) and returns its receipt.
// With Execute the receipt carries the outcome; invalid input or missing
// authority are recorded as refused (outcome class "refused").
func (c *Client) Invoke(ctx context.Context, key string, inv Invocation) (*wire.Receipt, error) {
	body := map[string]any{"type": wire.TypeInvocation, "object_key": inv.ObjectKey, "execute": inv.Execute}
	if inv.Input != nil {
		body["input"] = inv.Input
	} else {
		body["input"] = map[string]any{}
	}
	if inv.ReplayOf != "" {
		body["replay_of"] = inv.ReplayOf
	}
	return c.Dispatch(ctx, key, body)
}

func (c *Client) record(ctx context.Context, q url.Values) (*wire.Record, error) {
	r, err := c.do(ctx, http.MethodGet, c.apiURL("dispatch", q), nil, nil)
	if err != nil {
		return nil, err
	}
	var rec wire.Record
	if err := decodeInto(r, &rec, "ledger record"); err != nil {
		return nil, err
	}
	return &rec, nil
}

// Receipt replays the record of a receipt: GET /api/dispatch?receipt=inv_ID.
func (c *Client) Receipt(ctx context.Context, invID string) (*wire.Record, error) {
	if invID == "" {
		return nil, &Error{Status: http.StatusBadRequest, Code: protocol.EInvalid, Hint: "No inv_ID given: name the receipt's inv_ID."}
	}
	return c.record(ctx, url.Values{"receipt": {invID}})
}

// Latest returns the latest record of key: GET /api/dispatch?key=K.
func (c *Client) Latest(ctx context.Context, key string) (*wire.Record, error) {
	if key == "" {
		return nil, &Error{Status: http.StatusBadRequest, Code: protocol.EInvalid, Hint: "No key given."}
	}
	return c.record(ctx, url.Values{"key": {key}})
}

// History returns every version of key, oldest first:
// GET /api/dispatch?key=K&history=true.
func (c *Client) History(ctx context.Context, key string) (*wire.History, error) {
	if key == "" {
		return nil, &Error{Status: http.StatusBadRequest, Code: protocol.EInvalid, Hint: "No key given."}
	}
	// Page by page, following next_cursor.
	var h *wire.History
	cursor := ""
	for {
		q := url.Values{"key": {key}, "history": {"true"}, "limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r, err := c.do(ctx, http.MethodGet, c.apiURL("dispatch", q), nil, nil)
		if err != nil {
			return nil, err
		}
		var page wire.History
		if err := decodeInto(r, &page, "history"); err != nil {
			return nil, err
		}
		if h == nil {
			h = &page
		} else {
			h.Records = append(h.Records, page.Records...)
		}
		if page.NextCursor == nil || *page.NextCursor == cursor {
			h.NextCursor = nil
			return h, nil
		}
		cursor = *page.NextCursor
	}
}

// DirectoryOptions page the directory. A nil *DirectoryOptions means the
// first page of the server's default size.
type DirectoryOptions struct {
	// After is the cursor of the previous page (its Next).
	After string
	// Limit is the page size (0 = the server's default).
	Limit int
}

// Directory returns one page of the current directory rows:
// GET /api/directory.
func (c *Client) Directory(ctx context.Context, opts *DirectoryOptions) (*wire.DirectoryPage, error) {
	q := url.Values{}
	if opts != nil {
		if opts.After != "" {
			q.Set("after", opts.After)
		}
		if opts.Limit > 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
	}
	r, err := c.do(ctx, http.MethodGet, c.apiURL("directory", q), nil, nil)
	if err != nil {
		return nil, err
	}
	var p wire.DirectoryPage
	if err := decodeInto(r, &p, "directory page"); err != nil {
		return nil, err
	}
	return &p, nil
}

// DirectoryRows iterates over every current directory row, page by page.
func (c *Client) DirectoryRows(ctx context.Context) iter.Seq2[wire.DirectoryRow, error] {
	return func(yield func(wire.DirectoryRow, error) bool) {
		after := ""
		for {
			p, err := c.Directory(ctx, &DirectoryOptions{After: after})
			if err != nil {
				yield(wire.DirectoryRow{}, err)
				return
			}
			for _, r := range p.Rows {
				if !yield(r, nil) {
					return
				}
			}
			if p.Next == "" || p.Next == after {
				return
			}
			after = p.Next
		}
	}
}

// Command builds the exact command of directory row key for input, writing
// nothing: POST /api/commands/{key}.
func (c *Client) Command(ctx context.Context, key string, input map[string]any) (*wire.Command, error) {
	if key == "" {
		return nil, &Error{Status: http.StatusBadRequest, Code: protocol.EInvalid, Hint: "No row key given."}
	}
	if input == nil {
		input = map[string]any{}
	}
	r, err := c.do(ctx, http.MethodPost, c.apiURL("commands/"+url.PathEscape(key), nil), map[string]any{"input": input}, nil)
	if err != nil {
		return nil, err
	}
	var cmd wire.Command
	if err := decodeInto(r, &cmd, "command"); err != nil {
		return nil, err
	}
	return &cmd, nil
}

// Checkpoint returns the ledger's current signed checkpoint:
// GET /api/ledger/checkpoint.
func (c *Client) Checkpoint(ctx context.Context) (*wire.Checkpoint, error) {
	r, err := c.do(ctx, http.MethodGet, c.apiURL("ledger/checkpoint", nil), nil, nil)
	if err != nil {
		return nil, err
	}
	var ck wire.Checkpoint
	if err := decodeInto(r, &ck, "checkpoint"); err != nil {
		return nil, err
	}
	return &ck, nil
}

// LedgerKey returns the verifier key of the ledger's checkpoints and its
// origin: GET /api/ledger/key.
func (c *Client) LedgerKey(ctx context.Context) (publicKey, origin string, err error) {
	r, err := c.do(ctx, http.MethodGet, c.apiURL("ledger/key", nil), nil, nil)
	if err != nil {
		return "", "", err
	}
	var k struct {
		PublicKey string `json:"public_key"`
		Origin    string `json:"origin"`
	}
	if err := decodeInto(r, &k, "ledger key"); err != nil {
		return "", "", err
	}
	return k.PublicKey, k.Origin, nil
}

// Proof returns the inclusion proof of record invID in the tree of
// treeSize records (0 = the current tree): GET /api/ledger/proof.
func (c *Client) Proof(ctx context.Context, invID string, treeSize int64) (*wire.Proof, error) {
	q := url.Values{"inv_ID": {invID}}
	if treeSize > 0 {
		q.Set("tree_size", strconv.FormatInt(treeSize, 10))
	}
	r, err := c.do(ctx, http.MethodGet, c.apiURL("ledger/proof", q), nil, nil)
	if err != nil {
		return nil, err
	}
	var p wire.Proof
	if err := decodeInto(r, &p, "proof"); err != nil {
		return nil, err
	}
	return &p, nil
}

// Consistency returns the proof that the tree of to records (0 = the
// current tree) extends the tree of from records:
// GET /api/ledger/consistency.
func (c *Client) Consistency(ctx context.Context, from, to int64) (*wire.ConsistencyProof, error) {
	q := url.Values{"from": {strconv.FormatInt(from, 10)}}
	if to > 0 {
		q.Set("to", strconv.FormatInt(to, 10))
	}
	r, err := c.do(ctx, http.MethodGet, c.apiURL("ledger/consistency", q), nil, nil)
	if err != nil {
		return nil, err
	}
	var p wire.ConsistencyProof
	if err := decodeInto(r, &p, "consistency proof"); err != nil {
		return nil, err
	}
	return &p, nil
}
