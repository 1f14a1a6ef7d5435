package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/protocol"
)

// Defaults for Options fields left zero.
const (
	// DefaultTimeout bounds every request except streams.
	DefaultTimeout = 30 * time.Second
	// DefaultUserAgent is sent when Options.UserAgent is "".
	DefaultUserAgent = "asmp-go-client"
	// MaxResponseBytes caps the body of one (non-stream) response.
	MaxResponseBytes = 32 << 20
	// MaxLineBytes caps one line of a stream.
	MaxLineBytes = 8 << 20
)

// Options configure a Client. A nil *Options means all defaults.
type Options struct {
	// HTTPClient sends the requests (nil = a client with no overall
	// timeout, since streams are long-lived; Timeout bounds the others).
	HTTPClient *http.Client
	// Token, when set, is sent as "Authorization: Bearer <Token>" to the
	// server's own origin (never to other hosts).
	Token string
	// Timeout bounds each request other than streams (0 = DefaultTimeout;
	// < 0 = no timeout beyond the context's).
	Timeout time.Duration
	// UserAgent is the User-Agent header ("" = DefaultUserAgent).
	UserAgent string
}

// Client talks to one ASMP server over HTTP. It is safe for concurrent use.
type Client struct {
	base    *url.URL // without trailing slash
	baseStr string
	hc      *http.Client
	token   string
	timeout time.Duration
	ua      string
	// versions caches the stored definitions Constraints reads.
	versions versionCache
}

var _ Backend = (*Client)(nil)

// New returns a client of the ASMP API at baseURL: a server's root
// ("http://127.0.0.1:8000") or a workflow-scoped API
// ("http://127.0.0.1:8000/w/config-wizard-v1").
func New(baseURL string, opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	u, err := ParseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: u, baseStr: u.String(), hc: o.HTTPClient, token: o.Token, timeout: o.Timeout, ua: o.UserAgent}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.ua == "" {
		c.ua = DefaultUserAgent
	}
	return c, nil
}

// ParseBaseURL checks that s is an absolute http(s) URL without query or
// fragment and returns it without a trailing slash. A bare host:port is
// taken as http://host:port.
func ParseBaseURL(s string) (*url.URL, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("no server URL: give one, e.g. http://127.0.0.1:8000")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server URL %q: the scheme must be http or https", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server URL %q has no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("server URL %q: leave out the query, fragment and user info", s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// BaseURL returns the API base URL the client talks to.
func (c *Client) BaseURL() string { return c.baseStr }

func (c *Client) runPath(runID string, rest ...string) (string, error) {
	if strings.TrimSpace(runID) == "" {
		return "", &Error{Status: http.StatusNotFound, Code: protocol.ENotFound, Hint: "No run id given: name the run (its run_id)."}
	}
	p := c.baseStr + "/runs/" + url.PathEscape(runID)
	for _, r := range rest {
		p += "/" + r
	}
	return p, nil
}

// sameOrigin reports whether u is on the server's scheme and host, so that
// the token is never sent elsewhere.
func (c *Client) sameOrigin(u *url.URL) bool {
	return strings.EqualFold(u.Scheme, c.base.Scheme) && strings.EqualFold(u.Host, c.base.Host)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request and reads the whole answer. Non-2xx answers become
// *Error.
func (c *Client) do(ctx context.Context, method, rawURL string, body any, header http.Header) (*response, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	resp, err := c.send(ctx, method, rawURL, body, header)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, rawURL, err)
	}
	if len(b) > MaxResponseBytes {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, rawURL, MaxResponseBytes)
	}
	if resp.StatusCode >= 300 {
		return nil, httpError(method, rawURL, resp.StatusCode, b)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// send builds and sends a request; the caller closes the body.
func (c *Client) send(ctx context.Context, method, rawURL string, body any, header http.Header) (*http.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bad URL %q: %w", rawURL, err)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding the request body: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", method, rawURL, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" && c.sameOrigin(u) {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s: %w", method, redact(u), ctxErr)
		}
		return nil, fmt.Errorf("cannot reach the ASMP server at %s: %w", c.baseStr, err)
	}
	return resp, nil
}

func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// httpError builds the *Error of a non-2xx answer from its JSON body.
func httpError(method, rawURL string, status int, body []byte) *Error {
	e := &Error{Status: status, Code: protocol.CodeOf(status), Method: method, URL: rawURL}
	var m map[string]any
	if v, err := protocol.DecodeValue(body, 0); err == nil {
		m, _ = v.(map[string]any)
	}
	if m != nil {
		if h, ok := m["hint"].(string); ok {
			e.Hint = h
		}
		if code, ok := m["error"].(string); ok && code != "" {
			e.Code = code
		}
		delete(m, "hint")
		delete(m, "error")
		if len(m) > 0 {
			e.Fields = m
		}
	}
	if e.Hint == "" {
		text := strings.TrimSpace(string(body))
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		e.Hint = fmt.Sprintf("%s %s answered %d %s", method, rawURL, status, http.StatusText(status))
		if text != "" && m == nil {
			e.Hint += ": " + text
		}
		e.Hint += "."
	}
	return e
}

// decodeInto decodes r's body into v, keeping integers exact (see
// normalizeFrame).
func decodeInto(r *response, v any, what string) error {
	return decodeJSON(r.body, v, what)
}

func decodeJSON(b []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the server's %s is not valid JSON: %w", what, err)
	}
	return nil
}

// normalizeFrame turns the json.Numbers of f.Data into int64 or float64,
// as protocol.DecodeObject does.
func normalizeFrame(f *protocol.Frame) {
	if f.Data != nil {
		if v, err := protocol.NormalizeNumbers(f.Data); err == nil {
			f.Data, _ = v.(map[string]any)
		}
	}
}

func (c *Client) frame(r *response) (*RunFrame, error) {
	f := &RunFrame{ETag: r.header.Get("ETag")}
	if err := decodeInto(r, &f.Frame, "frame"); err != nil {
		return nil, err
	}
	normalizeFrame(&f.Frame)
	return f, nil
}

// Discover returns the discovery frame (GET /).
func (c *Client) Discover(ctx context.Context) (*RunFrame, error) {
	r, err := c.do(ctx, http.MethodGet, c.baseStr+"/", nil, nil)
	if err != nil {
		return nil, err
	}
	return c.frame(r)
}

// Workflows returns the catalog (GET /workflows).
func (c *Client) Workflows(ctx context.Context) ([]WorkflowInfo, error) {
	r, err := c.do(ctx, http.MethodGet, c.baseStr+"/workflows", nil, nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Workflows []WorkflowInfo `json:"workflows"`
	}
	if err := decodeInto(r, &out, "workflow catalog"); err != nil {
		return nil, err
	}
	return out.Workflows, nil
}

// StartRun creates a run (POST /runs) and returns its first frame.
func (c *Client) StartRun(ctx context.Context, workflowID string, data map[string]any) (*RunFrame, error) {
	body := map[string]any{}
	if workflowID != "" {
		body["workflow_id"] = workflowID
	}
	if data != nil {
		body["data"] = data
	}
	r, err := c.do(ctx, http.MethodPost, c.baseStr+"/runs", body, nil)
	if err != nil {
		return nil, err
	}
	return c.frame(r)
}

// Frame returns the run's current frame and its ETag (GET /runs/{id}).
func (c *Client) Frame(ctx context.Context, runID string) (*RunFrame, error) {
	p, err := c.runPath(runID)
	if err != nil {
		return nil, err
	}
	r, err := c.do(ctx, http.MethodGet, p, nil, nil)
	if err != nil {
		return nil, err
	}
	return c.frame(r)
}

// CLI returns the run's CLI object (GET /runs/{id}/cli).
func (c *Client) CLI(ctx context.Context, runID string) (protocol.CLI, error) {
	p, err := c.runPath(runID, "cli")
	if err != nil {
		return protocol.CLI{}, err
	}
	r, err := c.do(ctx, http.MethodGet, p, nil, nil)
	if err != nil {
		return protocol.CLI{}, err
	}
	var cli protocol.CLI
	if err := decodeInto(r, &cli, "CLI object"); err != nil {
		return protocol.CLI{}, err
	}
	return cli, nil
}

// Transition fires action (POST /runs/{id}/transitions/{action}).
func (c *Client) Transition(ctx context.Context, runID, action string, input map[string]any, opts *TransitionOptions) (*RunFrame, error) {
	if action == "" {
		return nil, &Error{Status: http.StatusBadRequest, Code: protocol.EInvalid, Hint: "No action given: name one of the frame's next_states."}
	}
	p, err := c.runPath(runID, "transitions", url.PathEscape(action))
	if err != nil {
		return nil, err
	}
	return c.post(ctx, p, input, opts)
}

// TransitionHref POSTs input to href, which must be on the client's server
// (a next_states href of a frame, or a start href of the discovery frame).
func (c *Client) TransitionHref(ctx context.Context, href string, input map[string]any, opts *TransitionOptions) (*RunFrame, error) {
	u, err := url.Parse(href)
	if err != nil {
		return nil, fmt.Errorf("href %q: %w", href, err)
	}
	if !u.IsAbs() {
		u = c.base.ResolveReference(u)
	}
	if !c.sameOrigin(u) {
		return nil, fmt.Errorf("href %q is not on the server %s; refusing to follow it", href, c.baseStr)
	}
	return c.post(ctx, u.String(), input, opts)
}

func (c *Client) post(ctx context.Context, rawURL string, input map[string]any, opts *TransitionOptions) (*RunFrame, error) {
	if input == nil {
		input = map[string]any{}
	}
	var h http.Header
	if opts != nil && opts.IfMatch != "" {
		h = http.Header{}
		v := strings.TrimSpace(opts.IfMatch)
		if !strings.HasPrefix(v, `"`) && !strings.HasPrefix(v, "W/") {
			v = `"` + v + `"`
		}
		h.Set("If-Match", v)
	}
	r, err := c.do(ctx, http.MethodPost, rawURL, input, h)
	if err != nil {
		return nil, err
	}
	return c.frame(r)
}

// InvokeTool calls a stage tool (POST /runs/{id}/invoke/{tool}) and returns
// the "result" of its answer.
func (c *Client) InvokeTool(ctx context.Context, runID, tool string, input map[string]any) (any, error) {
	p, err := c.runPath(runID, "invoke", url.PathEscape(tool))
	if err != nil {
		return nil, err
	}
	if input == nil {
		input = map[string]any{}
	}
	r, err := c.do(ctx, http.MethodPost, p, input, nil)
	if err != nil {
		return nil, err
	}
	v, err := protocol.DecodeValue(r.body, 0)
	if err != nil {
		return nil, fmt.Errorf("the server's tool answer is not valid JSON: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New(`the server's tool answer is not an object with a "result"`)
	}
	return m["result"], nil
}

// Resource reads a stage resource (GET /runs/{id}/resources/{path}).
func (c *Client) Resource(ctx context.Context, runID, path string) (*Content, error) {
	segs := strings.Split(strings.TrimLeft(path, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	p, err := c.runPath(runID, "resources", strings.Join(segs, "/"))
	if err != nil {
		return nil, err
	}
	r, err := c.do(ctx, http.MethodGet, p, nil, http.Header{"Accept": {"*/*"}})
	if err != nil {
		return nil, err
	}
	return &Content{Body: r.body, MimeType: r.header.Get("Content-Type")}, nil
}

// Events returns the run's whole history (GET /runs/{id}/events),
// following next_cursor from page to page.
func (c *Client) Events(ctx context.Context, runID string) (*EventLog, error) {
	p, err := c.runPath(runID, "events")
	if err != nil {
		return nil, err
	}
	var log *EventLog
	cursor := ""
	for {
		path := p + "?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := c.do(ctx, http.MethodGet, path, nil, nil)
		if err != nil {
			return nil, err
		}
		var page EventLog
		if err := decodeInto(r, &page, "event log"); err != nil {
			return nil, err
		}
		if log == nil {
			log = &page
		} else {
			log.Events = append(log.Events, page.Events...)
		}
		if page.NextCursor == nil || *page.NextCursor == cursor {
			log.NextCursor = nil
			return log, nil
		}
		cursor = *page.NextCursor
	}
}

// MigrateRequest is the body of POST /workflows/{id}/migrate.
type MigrateRequest struct {
	From   string            `json:"from"`
	To     string            `json:"to"`
	DryRun bool              `json:"dry_run,omitempty"`
	States map[string]string `json:"states,omitempty"`
}

// Migrate re-pins the active runs of workflowID from one version to
// another (POST /workflows/{id}/migrate; the token needs the admin scope)
// and returns the server's report.
func (c *Client) Migrate(ctx context.Context, workflowID string, req MigrateRequest) (*protocol.MigrationReport, error) {
	r, err := c.do(ctx, http.MethodPost, c.baseStr+"/workflows/"+url.PathEscape(workflowID)+"/migrate", req, nil)
	if err != nil {
		return nil, err
	}
	var out protocol.MigrationReport
	if err := decodeInto(r, &out, "migration report"); err != nil {
		return nil, err
	}
	return &out, nil
}
