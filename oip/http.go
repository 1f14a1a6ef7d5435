package oip

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/internal/edge/paging"
	"github.com/asmp-dev/asmp/protocol"
)

// API returns the HTTP API of the ledger, on paths under /api/, for an
// HTTP edge to serve (the server's, or Handler's):
//
//	POST /api/dispatch                 dispatch scope; 201 Receipt
//	GET  /api/dispatch?receipt=INV     read; the Record
//	GET  /api/dispatch?key=K           read; the key's latest Record
//	GET  /api/dispatch?key=K&history=true  read; {"key", "records": [...]}, oldest first
//	GET  /api/directory?after=&limit=  read; DirectoryPage
//	POST /api/commands/{key}           read; {"input": {...}} → {"argv", "command", "invocation_method"}
//	GET  /api/ledger/checkpoint        read; the signed note (text/plain), or Checkpoint as JSON with Accept: application/json
//	GET  /api/ledger/key               read; the verifier key (text/plain), or {"public_key", "origin"} as JSON
//	GET  /api/ledger/proof?inv_ID=&tree_size=  read; Proof
//	GET  /api/ledger/consistency?from=&to=     read; ConsistencyProof
//	GET  /api/ledger/records?cursor=&limit=    read; RecordPage, newest first
//
// The API holds handlers only: the edge checks the caller's scope (from
// auth.FromContext; 403 without it), answers other methods with 405 and
// unknown paths under /api/ with 404, and writes every error body as
// {"status": "error", "error": code, "hint": ...}.
func (s *Service) API() httpx.API {
	return httpx.API{
		Routes: []httpx.Route{
			{Method: http.MethodPost, Path: "/api/dispatch", Scope: auth.ScopeDispatch, Handle: s.postDispatch},
			{Method: http.MethodGet, Path: "/api/dispatch", Scope: auth.ScopeRead, Handle: s.getDispatch},
			{Method: http.MethodGet, Path: "/api/directory", Scope: auth.ScopeRead, Handle: s.getDirectory},
			{Method: http.MethodPost, Path: "/api/commands/{key}", Scope: auth.ScopeRead, Handle: s.postCommand},
			{Method: http.MethodGet, Path: "/api/ledger/checkpoint", Scope: auth.ScopeRead, Handle: s.getCheckpoint},
			{Method: http.MethodGet, Path: "/api/ledger/key", Scope: auth.ScopeRead, Handle: s.getKey},
			{Method: http.MethodGet, Path: "/api/ledger/proof", Scope: auth.ScopeRead, Handle: s.getProof},
			{Method: http.MethodGet, Path: "/api/ledger/consistency", Scope: auth.ScopeRead, Handle: s.getConsistency},
			{Method: http.MethodGet, Path: "/api/ledger/records", Scope: auth.ScopeRead, Handle: s.getRecords},
		},
		Errors: httpx.ErrorStyle{Status: StatusError},
		Prefix: "/api/",
		NotFound: func(r *http.Request) error {
			return protocol.Errorf(protocol.ENotFound, "No ledger endpoint at %s; see /api/dispatch, /api/directory, /api/commands/{key} and /api/ledger/{checkpoint,key,proof,consistency,records}.", protocol.Truncate(r.URL.Path, 200))
		},
	}
}

// Handler serves API on its own, with the caller's principal read from
// the request's context (auth.Open when there is none): for tests, and for
// mounting the ledger without an ASMP server. A server serves API itself
// (server.Options.API), behind its authentication, limits and access log.
func (s *Service) Handler() http.Handler {
	e := httpx.NewEdge(s.log)
	e.Mount(s.API())
	return e
}

func (s *Service) postDispatch(w http.ResponseWriter, r *http.Request) error {
	b, err := httpx.ReadBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	if s.exec != nil {
		// An executed invocation answers when its command ends, which the
		// Executor bounds (its timeout); the server's write timeout must
		// not cut that answer off. The answer itself is small.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	withProof, err := boolParam(r.URL.Query(), "proof")
	if err != nil {
		return err
	}
	rc, err := s.DispatchJSON(r.Context(), b)
	if err != nil {
		return err
	}
	if withProof {
		if rc.Checkpoint, rc.Proof, err = s.Evidence(r.Context(), rc.InvID, rc.Seq); err != nil {
			return err
		}
	}
	w.Header().Set("Location", "/api/dispatch?receipt="+url.QueryEscape(rc.InvID))
	httpx.WriteJSON(w, http.StatusCreated, rc)
	return nil
}

func (s *Service) getDispatch(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	inv, key := q.Get("receipt"), q.Get("key")
	history := false
	if h := q.Get("history"); h != "" {
		var err error
		if history, err = strconv.ParseBool(h); err != nil {
			return invalidf("history", "history must be true or false, not %q.", protocol.Truncate(h, 20))
		}
	}
	switch {
	case inv != "" && key != "":
		return invalidf("receipt", "Give either receipt=inv_ID or key=K, not both.")
	case inv != "":
		if history {
			return invalidf("history", "history applies to key=K; a receipt names one record.")
		}
		withProof, err := boolParam(q, "proof")
		if err != nil {
			return err
		}
		rec, err := s.Record(r.Context(), inv)
		if err != nil {
			return err
		}
		if withProof {
			ck, p, err := s.Evidence(r.Context(), rec.InvID, rec.Seq)
			if err != nil {
				return err
			}
			httpx.WriteJSON(w, http.StatusOK, withEvidence(rec, ck, p))
			return nil
		}
		httpx.WriteJSON(w, http.StatusOK, rec)
	case key != "":
		if err := CheckKey(key); err != nil {
			return err
		}
		if history {
			p, err := historyList.Parse(q)
			if err != nil {
				return err
			}
			after, err := paging.Seq(p.After, "after")
			if err != nil {
				return err
			}
			recs, more, err := s.History(r.Context(), key, after, p.Limit)
			if err != nil {
				return err
			}
			h := History{Key: key, Records: recs}
			if len(recs) > 0 {
				h.NextCursor = historyList.Next(strconv.FormatInt(recs[len(recs)-1].Seq, 10), more)
			}
			httpx.WriteJSON(w, http.StatusOK, h)
			return nil
		}
		rec, err := s.Latest(r.Context(), key)
		if err != nil {
			return err
		}
		httpx.WriteJSON(w, http.StatusOK, rec)
	default:
		return invalidf("receipt", "Give receipt=inv_ID for one record, or key=K for a key's latest record (add history=true for all its versions).")
	}
	return nil
}

// historyList pages a key's history (after=SEQ still accepted).
var historyList = paging.List{Name: "history", Default: 100, Max: 1000, After: "after"}

func (s *Service) getDirectory(w http.ResponseWriter, r *http.Request) error {
	list := paging.List{Name: "directory", Default: s.maxPage, Max: s.maxPage, After: "after"}
	p, err := list.Parse(r.URL.Query())
	if err != nil {
		return err
	}
	page, err := s.Directory(r.Context(), p.After, p.Limit)
	if err != nil {
		return err
	}
	page.NextCursor = list.Next(page.Next, page.Next != "")
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

func (s *Service) postCommand(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if err := CheckKey(key); err != nil {
		return err
	}
	b, err := httpx.ReadBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	req, err := protocol.DecodeObject(b, s.maxDepth)
	if err != nil {
		return err
	}
	var input map[string]any
	for k, v := range req {
		if k != "input" {
			return invalidf(k, `Unknown field %q; send {"input": {...}} keyed by the row's arg and flag names.`, protocol.Truncate(k, 64))
		}
		if v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return invalidf("input", `input must be a JSON object keyed by the row's arg and flag names.`)
		}
		input = m
	}
	cmd, err := s.Command(r.Context(), key, input)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, cmd)
	return nil
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

func writeText(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(text))
}

func (s *Service) getCheckpoint(w http.ResponseWriter, r *http.Request) error {
	ck, err := s.Checkpoint(r.Context())
	if err != nil {
		return err
	}
	if wantsJSON(r) {
		w.Header().Set("Cache-Control", "no-store")
		httpx.WriteJSON(w, http.StatusOK, ck)
		return nil
	}
	writeText(w, ck.Note)
	return nil
}

func (s *Service) getKey(w http.ResponseWriter, r *http.Request) error {
	if wantsJSON(r) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"public_key": s.key.vkey, "origin": s.origin})
		return nil
	}
	writeText(w, s.key.vkey+"\n")
	return nil
}

// intParam parses an optional positive integer query parameter (0 when
// absent).
func intParam(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, invalidf(name, "%s must be a positive integer, not %q.", name, protocol.Truncate(v, 20))
	}
	return n, nil
}

func (s *Service) getProof(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	inv := q.Get("inv_ID")
	if inv == "" {
		return invalidf("inv_ID", "inv_ID is required: the receipt's inv_ID (add tree_size=N for a proof in an older tree).")
	}
	size, err := intParam(q, "tree_size")
	if err != nil {
		return err
	}
	p, err := s.Proof(r.Context(), inv, size)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, p)
	return nil
}

func (s *Service) getConsistency(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Get("from") == "" {
		return invalidf("from", "from is required: the tree size of the older checkpoint (to defaults to the current size).")
	}
	from, err := intParam(q, "from")
	if err != nil {
		return err
	}
	to, err := intParam(q, "to")
	if err != nil {
		return err
	}
	p, err := s.Consistency(r.Context(), from, to)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, p)
	return nil
}
