package console_test

// The console in a real browser: Debian's chromium, headless, driven by
// chromedp against the real server (server.New on an httptest server).
// One browser process serves every test of the package (TestMain); each
// test opens its own tabs. Every test fails on any console error or
// uncaught exception of its pages, and saves screenshots of the pages it
// visits to $ASMP_TEST_ARTIFACTS (default: a directory under os.TempDir()
// that is kept; scripts/test prints it, go test -v each file).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

var (
	browserCtx context.Context // nil when chromium is missing
	missing    string          // why there is no browser
	artifacts  string
)

func TestMain(m *testing.M) {
	artifacts = os.Getenv("ASMP_TEST_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(os.TempDir(), "asmp-test-artifacts")
	}
	artifacts = filepath.Join(artifacts, "console")
	flag.Parse()
	path, err := exec.LookPath("chromium")
	if err != nil || testing.Short() {
		missing = "chromium is not installed (scripts/test installs it with apt-get)"
		os.Exit(m.Run())
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI containers
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(ctx); err != nil { // start the browser
		fmt.Fprintf(os.Stderr, "starting chromium: %v\n", err)
		cancel()
		cancelAlloc()
		os.Exit(1)
	}
	browserCtx = ctx
	code := m.Run()
	cancel()
	cancelAlloc()
	os.Exit(code)
}

// needBrowser skips the test without chromium, except under CI=1, where a
// missing browser is a failure.
func needBrowser(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the browser tests need chromium (scripts/test runs them)")
	}
	if browserCtx != nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI: %s", missing)
	}
	t.Skip(missing)
}

// tab is one browser tab: its context and the console errors it saw.
type tab struct {
	t    *testing.T
	ctx  context.Context
	name string
	mu   sync.Mutex
	errs []string
}

// newTab opens a tab at 1280×900 whose console is watched; the test fails
// at its end if the page logged an error or threw. Entries of the network
// log (an HTTP error status the page shows as a hint) are not errors of the
// page; CSP violations and script errors are.
func newTab(t *testing.T, name string) *tab {
	t.Helper()
	needBrowser(t)
	// A browser context of its own: no storage is shared with other tests
	// (an httptest port, and so an origin, may come round again).
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	tb := &tab{t: t, ctx: ctx, name: name}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError && m.Source != "network" {
				tb.mu.Lock()
				tb.errs = append(tb.errs, fmt.Sprintf("%s (%s:%d)", m.String(), m.URL, m.Line))
				tb.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancelT()
		cancel()
		<-done
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for _, e := range tb.errs {
			t.Errorf("tab %s: console error: %s", name, e)
		}
	})
	return tb
}

func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		tb.t.Fatalf("tab %s: %v", tb.name, err)
	}
}

// waitJS waits until the JavaScript expression is truthy.
func (tb *tab) waitJS(expr string) {
	tb.t.Helper()
	if _, err := chromedp.Run(tb.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		text, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.querySelector('main')?.innerText || ''`))
		tb.shot("FAILED-" + tb.name)
		tb.t.Fatalf("tab %s: waiting for %s: %v\npage text:\n%s", tb.name, expr, err, text)
	}
}

// text returns the visible text of the first element sel matches, once
// there is one. It reads it in one step in the page: a node looked up
// first and read after may have been drawn anew in between.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	q, err := json.Marshal(sel)
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.waitJS(`!!document.querySelector(` + string(q) + `)`)
	return tb.eval(`document.querySelector(` + string(q) + `)?.innerText ?? ''`)
}

func (tb *tab) eval(js string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		tb.t.Fatalf("tab %s: %s: %v", tb.name, js, err)
	}
	return s
}

// shot saves a PNG of the viewport as artifacts/name.png.
func (tb *tab) shot(name string) {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	p := filepath.Join(artifacts, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot: %s", p)
}

// viewport switches the tab to a width (a phone: 390) and a color scheme.
func (tb *tab) viewport(width int64, scheme string) {
	tb.t.Helper()
	tb.do(chromedp.EmulateViewport(width, 900))
	if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	}); err != nil {
		tb.t.Fatal(err)
	}
}

// consoleServer is a real asmp server with the built-in workflows and an
// OIP ledger, all in memory.
type consoleServer struct {
	url    string
	eng    *engine.Engine
	ledger *oip.Service
}

func newServer(t *testing.T, opts *server.Options) *consoleServer {
	t.Helper()
	return newServerOn(t, memstore.New(), examples.All(), opts)
}

// newServerOn is newServer serving defs from st (which it closes at the end).
func newServerOn(t *testing.T, st store.Store, defs []*workflow.Definition, opts *server.Options) *consoleServer {
	t.Helper()
	return newServerWith(t, st, defs, opts, nil)
}

// newServerWith is newServerOn with engine options (its Invoker is the
// ledger's).
func newServerWith(t *testing.T, st store.Store, defs []*workflow.Definition, opts *server.Options, eopts *engine.Options) *consoleServer {
	t.Helper()
	ledger, err := oip.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var eo engine.Options
	if eopts != nil {
		eo = *eopts
	}
	eo.Invoker = oip.NewInvoker(ledger)
	eng, err := engine.New(st, defs, &eo)
	if err != nil {
		t.Fatal(err)
	}
	w := eng.StartWorkers(&engine.WorkerOptions{Poll: 50 * time.Millisecond})
	var o server.Options
	if opts != nil {
		o = *opts
	}
	o.API = ledger.API()
	srv := server.New(eng, &o)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Shutdown()
		hs.Close()
		w.Stop(time.Second)
		st.Close()
	})
	return &consoleServer{url: hs.URL, eng: eng, ledger: ledger}
}

func (s *consoleServer) start(t *testing.T, wf string) string {
	t.Helper()
	r, err := s.eng.StartRun(context.Background(), wf, nil, engine.StartOptions{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func (s *consoleServer) state(t *testing.T, id string) string {
	t.Helper()
	r, err := s.eng.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// rewritingProxy is a test double in front of the server at target: it
// passes every request on and hands the body of each successful answer to
// path to edit before the browser sees it. It returns the double's URL.
func rewritingProxy(t *testing.T, target, path string, edit func([]byte) []byte) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(res *http.Response) error {
		if res.Request.URL.Path != path || res.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		b = edit(b)
		res.Body = io.NopCloser(bytes.NewReader(b))
		res.ContentLength = int64(len(b))
		res.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	return ps.URL
}

func rowSel(id string) string { return `tr[data-run-id="` + id + `"]` }

// The runs page lists the runs, filters them by workflow, state and
// status, and shows a run started while it is open (polling).
func TestRunsPageListsAndFilters(t *testing.T) {
	s := newServer(t, nil)
	w1, w2 := s.start(t, "config-wizard-v1"), s.start(t, "config-wizard-v1")
	e1 := s.start(t, "expense-approval-v1")
	if _, err := s.eng.Transition(context.Background(), w2, "start", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, "runs")
	tb.do(chromedp.Navigate(s.url + "/console/"))
	tb.waitJS(`document.querySelectorAll('tbody tr[data-run-id]').length === 3`)
	if got := tb.text(rowSel(w2) + " td:nth-child(3)"); got != "CONFIGURE" {
		t.Fatalf("state cell of %s: %q", w2, got)
	}
	tb.shot("runs")

	// Filter by workflow: the select changes the page's address.
	tb.do(chromedp.SetValue(chromedp.CSS("#filter-workflow"), "expense-approval-v1"))
	tb.waitJS(`location.hash.includes('workflow_id=expense-approval-v1') && document.querySelectorAll('tbody tr[data-run-id]').length === 1`)
	tb.waitJS(`!!document.querySelector('` + rowSel(e1) + `')`)
	// By status.
	tb.do(chromedp.Navigate(s.url + "/console/#/runs?status=active"))
	tb.waitJS(`document.querySelectorAll('tbody tr[data-run-id]').length === 2 && !document.querySelector('` + rowSel(e1) + `')`)
	// By workflow and state.
	tb.do(chromedp.Navigate(s.url + "/console/#/runs?workflow_id=config-wizard-v1&state=INITIAL"))
	tb.waitJS(`document.querySelectorAll('tbody tr[data-run-id]').length === 1 && !!document.querySelector('` + rowSel(w1) + `')`)
	// Live: a run that starts now shows up, one that leaves the filter goes.
	w3 := s.start(t, "config-wizard-v1")
	tb.waitJS(`!!document.querySelector('` + rowSel(w3) + `')`)
	if _, err := s.eng.Transition(context.Background(), w1, "start", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.waitJS(`!document.querySelector('` + rowSel(w1) + `')`)
	tb.shot("runs-filtered")
	// A filter the server refuses: its hint, in place.
	tb.do(chromedp.Navigate(s.url + "/console/#/runs?workflow_id=config-wizard-v1&state=NOPE"))
	tb.waitJS(`document.querySelector('.errors .notice.error .hint')?.textContent.includes('has no state "NOPE"')`)
	tb.shot("runs-bad-filter")

	// The same page on a phone, dark.
	tb.viewport(390, "dark")
	tb.do(chromedp.Navigate(s.url + "/console/#/runs"))
	tb.waitJS(`document.querySelectorAll('tbody tr[data-run-id]').length === 4`)
	tb.shot("runs-phone-dark")
}

// More runs change between two polls than a page holds (the page size is
// set in the address): the poll follows next_cursor, past its bound of
// pages at the next poll, and shows every changed run, in the list's
// order. A double in front of the server holds the first poll until 25
// runs have started: 13 pages of 2, more than one poll reads.
func TestRunsPollFollowsNextCursor(t *testing.T) {
	s := newServer(t, nil)
	s.start(t, "config-wizard-v1")
	target, _ := url.Parse(s.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	polled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/runs" && r.URL.Query().Has("updated_after") {
			once.Do(func() { close(polled) })
			<-release
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ps.Close)
	open := sync.OnceFunc(func() { close(release) })
	t.Cleanup(open) // before ps.Close: a held poll must not keep it waiting
	tb := newTab(t, "runs-many")
	tb.do(chromedp.Navigate(ps.URL + "/console/#/runs?limit=2"))
	tb.waitJS(`document.querySelectorAll('tbody tr[data-run-id]').length === 1 && document.querySelector('.live')?.textContent.startsWith('Live')`)
	select {
	case <-polled:
	case <-tb.ctx.Done():
		t.Fatal("the page does not poll")
	}
	for i := range 25 {
		s.start(t, []string{"config-wizard-v1", "expense-approval-v1"}[i%2])
	}
	open()
	tb.waitJS(`document.querySelectorAll('tbody tr[data-run-id]').length === 26`)
	got := strings.Split(tb.eval(`[...document.querySelectorAll('tbody tr[data-run-id]')].map((tr) => tr.dataset.runId).join(' ')`), " ")
	if want := s.listOrder(t); !slices.Equal(got, want) {
		t.Fatalf("rows in the order\n%v, want newest first\n%v", got, want)
	}
	tb.shot("runs-many-changed")
}

// listOrder is the ids of every run in the console's order: newest
// updated_at as listed (to the millisecond) first, ties by run_id.
func (s *consoleServer) listOrder(t *testing.T) []string {
	t.Helper()
	res, err := http.Get(s.url + "/runs?limit=500")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p struct {
		Runs []struct {
			RunID     string `json:"run_id"`
			UpdatedAt string `json:"updated_at"`
		} `json:"runs"`
	}
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(p.Runs, func(a, b struct {
		RunID     string `json:"run_id"`
		UpdatedAt string `json:"updated_at"`
	}) int {
		return -cmp.Or(cmp.Compare(a.UpdatedAt, b.UpdatedAt), cmp.Compare(a.RunID, b.RunID))
	})
	var out []string
	for _, r := range p.Runs {
		out = append(out, r.RunID)
	}
	return out
}

// An operator drives config-wizard-v1 to DONE by clicking and typing, and
// a second tab open on the same run follows every step from the stream.
func TestDriveConfigWizardToDone(t *testing.T) {
	s := newServer(t, nil)
	a := newTab(t, "operator")
	a.do(chromedp.Navigate(s.url + "/console/#/workflows"))
	a.waitJS(`document.querySelectorAll('.workflow-list .card').length === 2 && !!document.querySelector('.diagram svg')`)
	a.shot("workflows")
	a.do(chromedp.Click(chromedp.CSS(`.workflow-list .card button.primary`)))
	a.waitJS(`location.hash.startsWith('#/runs/') && document.querySelector('#run-state')?.textContent === 'INITIAL'`)
	id := strings.TrimPrefix(a.eval(`location.hash`), "#/runs/")
	if s.state(t, id) != "INITIAL" {
		t.Fatalf("run %s is in %s", id, s.state(t, id))
	}
	// The options are buttons that show their keys: Start wizard [1].
	if got := a.text(`button[data-action="start"]`); !strings.Contains(got, "Start wizard") || !strings.Contains(got, "1") {
		t.Fatalf("start button reads %q", got)
	}

	b := newTab(t, "watcher")
	b.do(chromedp.Navigate(s.url + "/console/#/runs/" + id))
	b.waitJS(`document.querySelector('#run-state')?.textContent === 'INITIAL' && document.querySelector('.live')?.textContent.includes('Live')`)

	// Start, with the CLI key.
	a.do(chromedp.KeyEvent("1"))
	a.waitJS(`document.querySelector('#run-state')?.textContent === 'CONFIGURE' && !!document.querySelector('#in-save-value')`)
	b.waitJS(`document.querySelector('#run-state')?.textContent === 'CONFIGURE'`)
	// Type the value and save.
	a.do(chromedp.SendKeys(chromedp.CSS("#in-save-value"), "dark-mode"))
	a.do(chromedp.Click(chromedp.CSS(`button[data-action="save"]`)))
	a.waitJS(`document.querySelector('#run-state')?.textContent === 'CONFIRM'`)
	b.waitJS(`document.querySelector('#run-state')?.textContent === 'CONFIRM' && document.querySelector('pre.data').textContent.includes('dark-mode')`)
	a.waitJS(`!!document.querySelector('button[data-action="confirm"]') && document.querySelector('.diagram')?.dataset.current === 'CONFIRM'`)
	a.shot("run-confirm")
	// Confirm with a click.
	a.do(chromedp.Click(chromedp.CSS(`button[data-action="confirm"]`)))
	a.waitJS(`document.querySelector('#run-state')?.textContent === 'DONE' && document.querySelector('#run-status')?.textContent === 'completed'`)
	b.waitJS(`document.querySelector('#run-state')?.textContent === 'DONE' && document.querySelector('#run-status')?.textContent === 'completed'`)
	if got := s.state(t, id); got != "DONE" {
		t.Fatalf("the server has the run in %s", got)
	}
	// The history and the diagram followed in the watching tab.
	b.waitJS(`document.querySelectorAll('table.history tbody tr').length === 4 && document.querySelector('.diagram')?.dataset.current === 'DONE'`)
	b.shot("run-done")
	b.viewport(390, "dark")
	b.waitJS(`document.querySelector('#run-state')?.textContent === 'DONE'`)
	b.shot("run-phone-dark")
}

// Typed inputs are checked before anything is sent, and a critical action
// asks for confirmation.
func TestTypedInputsAndCriticalConfirmation(t *testing.T) {
	s := newServer(t, nil)
	id := s.start(t, "expense-approval-v1")
	tb := newTab(t, "expense")
	tb.do(chromedp.Navigate(s.url + "/console/#/runs/" + id))
	tb.waitJS(`!!document.querySelector('#in-submit-amount')`)
	tb.do(chromedp.SendKeys(chromedp.CSS("#in-submit-amount"), "a lot"))
	tb.do(chromedp.SendKeys(chromedp.CSS("#in-submit-description"), "Team lunch"))
	tb.do(chromedp.Click(chromedp.CSS(`button[data-action="submit"]`)))
	tb.waitJS(`document.querySelector('#in-submit-amount-err').textContent.includes('amount must be a number')`)
	tb.shot("run-type-error")
	if got := s.state(t, id); got != "SUBMIT" {
		t.Fatalf("a wrongly typed input was sent: the run is in %s", got)
	}
	tb.eval(`document.querySelector('#in-submit-amount').value = '', ''`)
	tb.do(chromedp.SendKeys(chromedp.CSS("#in-submit-amount"), "42.5"))
	tb.do(chromedp.Click(chromedp.CSS(`button[data-action="submit"]`)))
	tb.waitJS(`document.querySelector('#run-state')?.textContent === 'REVIEW'`)
	// A person reads the state's CLI hint, with the run's data; the agents'
	// hint is the title.
	tb.waitJS(`document.querySelector('.run-hint').textContent.includes('Team lunch: 42.5 EUR')`)
	if title := tb.eval(`document.querySelector('.run-hint').title`); !strings.Contains(title, "approve is offered only up to the approval limit") {
		t.Fatalf("the agents' hint as the title: %q", title)
	}
	// reject is critical: Cancel in the dialog sends nothing.
	tb.do(chromedp.SendKeys(chromedp.CSS("#in-reject-reason"), "no receipt"))
	tb.do(chromedp.Click(chromedp.CSS(`button[data-action="reject"]`)))
	tb.waitJS(`document.querySelector('#confirm-dialog').open`)
	tb.shot("run-critical-confirm")
	tb.do(chromedp.Click(chromedp.CSS(`#confirm-dialog button[value="cancel"]`)))
	tb.waitJS(`!document.querySelector('#confirm-dialog').open`)
	if got := s.state(t, id); got != "REVIEW" {
		t.Fatalf("a cancelled critical action was sent: the run is in %s", got)
	}
	tb.do(chromedp.Click(chromedp.CSS(`button[data-action="reject"]`)))
	tb.waitJS(`document.querySelector('#confirm-dialog').open`)
	// Cancel and ask again at once: the first showing's close event is still
	// queued when the second opens, and must not answer the second.
	tb.eval(`document.querySelector('#confirm-dialog button[value="cancel"]').click(),
		document.querySelector('button[data-action="reject"]').click(), ''`)
	tb.waitJS(`document.querySelector('#confirm-dialog').open`)
	tb.do(chromedp.Click(chromedp.CSS(`#confirm-dialog button[value="confirm"]`)))
	tb.waitJS(`document.querySelector('#run-state')?.textContent === 'REJECTED'`)
}

// With tokens the console asks for one on the first 401 and keeps it for
// the tab; an action the token may not take is refused and its hint shown
// in place, as is the hint of an unknown run.
func TestTokenAndRefusedActionHint(t *testing.T) {
	tokens, err := auth.NewTokens([]string{"viewer=viewer-secret-0123456789:read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &server.Options{Authenticate: tokens.Authenticate})
	id := s.start(t, "config-wizard-v1")
	tb := newTab(t, "viewer")
	tb.do(chromedp.Navigate(s.url + "/console/#/runs/" + id))
	tb.waitJS(`document.querySelector('#token-dialog').open && document.querySelector('#token-dialog .hint').textContent.includes('token')`)
	tb.shot("token-dialog")
	// Escape without a token: the page says why it is empty.
	tb.do(chromedp.KeyEvent("\x1b"))
	tb.waitJS(`!document.querySelector('#token-dialog').open && document.querySelector('.notice.error .hint')?.textContent.includes('No token was given')`)
	tb.do(chromedp.Reload())
	tb.waitJS(`document.querySelector('#token-dialog').open`)
	tb.do(chromedp.SendKeys(chromedp.CSS("#token-input"), "viewer-secret-0123456789"))
	tb.do(chromedp.Click(chromedp.CSS(`#token-dialog button[type="submit"]`)))
	tb.waitJS(`document.querySelector('#run-state')?.textContent === 'INITIAL'`)
	if got := tb.eval(`sessionStorage.getItem('asmp.token')`); got != "viewer-secret-0123456789" {
		t.Fatalf("token kept as %q", got)
	}
	if strings.Contains(tb.eval(`location.href`), "secret") {
		t.Fatal("the token is in the URL")
	}
	tb.do(chromedp.Click(chromedp.CSS(`button[data-action="start"]`)))
	tb.waitJS(`document.querySelector('.action-message .hint')?.textContent.includes('needs the "runs" scope')`)
	tb.shot("run-refused")
	if got := s.state(t, id); got != "INITIAL" {
		t.Fatalf("refused action moved the run to %s", got)
	}
	tb.do(chromedp.Navigate(s.url + "/console/#/runs/no-such-run"))
	tb.waitJS(`document.querySelector('.notice.error .hint')?.textContent.length > 0`)
	hint := tb.text(".notice.error .hint")
	if !strings.Contains(strings.ToLower(hint), "not found") {
		t.Fatalf("unknown run shows %q", hint)
	}
	tb.shot("run-not-found")
}

// The ledger page lists rows and records with their links, and a receipt
// is checked in the browser: verified from the real server, not verified
// when a test double in front of it alters one byte of the proof, and a
// key mismatch is shown when the pinned key differs from the server's.
func TestLedgerReceiptVerification(t *testing.T) {
	s := newServer(t, nil)
	var invs []string
	for i, body := range []string{rowBody("Say it."), rowBody("Say it twice."), rowBody("Say it thrice.")} {
		rc, err := s.ledger.Dispatch(context.Background(), "echo-row", []byte(body))
		if err != nil {
			t.Fatalf("dispatch %d: %v", i, err)
		}
		invs = append(invs, rc.InvID)
	}
	tb := newTab(t, "ledger")
	tb.do(chromedp.Navigate(s.url + "/console/#/ledger"))
	tb.waitJS(`document.querySelectorAll('table.records tbody tr').length === 3 && document.querySelectorAll('table.rows tbody tr').length === 1`)
	if got := tb.text(`table.records tbody tr:first-child td:first-child`); got != "3" {
		t.Fatalf("newest record first: seq %q", got)
	}
	tb.shot("ledger")
	tb.do(chromedp.Navigate(s.url + "/console/#/ledger/" + invs[1]))
	tb.waitJS(`document.querySelector('#verdict')?.classList.contains('ok')`)
	if got := tb.text("#verdict"); !strings.Contains(got, "Verified") || strings.Contains(got, "Not") {
		t.Fatalf("verdict %q", got)
	}
	if got := tb.text("#pinned-key"); got != s.ledger.VerifierKey() {
		t.Fatalf("pinned key %q, want the server's %q", got, s.ledger.VerifierKey())
	}
	tb.shot("receipt-verified")

	// A test double alters one byte of every inclusion proof.
	ps := rewritingProxy(t, s.url, "/api/ledger/proof", func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"proof":["`)) + len(`"proof":["`)
		if b[i] == '0' {
			b[i] = '1'
		} else {
			b[i] = '0'
		}
		return b
	})
	tampered := newTab(t, "tampered")
	tampered.do(chromedp.Navigate(ps + "/console/#/ledger/" + invs[1]))
	tampered.waitJS(`document.querySelector('#verdict')?.classList.contains('bad')`)
	if got := tampered.text("#verdict"); !strings.Contains(got, "Not verified") {
		t.Fatalf("tampered verdict %q", got)
	}
	if got := tampered.text(".steps li.bad"); !strings.Contains(got, "root") {
		t.Fatalf("failed step %q", got)
	}
	tampered.shot("receipt-not-verified")

	// A pinned key that is not the server's: mismatch shown, not verified.
	other := "other+12345678+AQ" + strings.Repeat("A", 42) + "="
	tb.eval(`localStorage.setItem('asmp.verifierKey', ` + strconv.Quote(other) + `), ''`)
	tb.do(chromedp.Navigate(s.url + "/console/#/ledger/" + invs[0]))
	tb.waitJS(`document.querySelector('#verdict')?.classList.contains('bad') && !!document.querySelector('.key-mismatch')`)
	tb.shot("receipt-key-mismatch")
	// Pasting the right key verifies again.
	tb.do(chromedp.SendKeys(chromedp.CSS("#paste-key"), s.ledger.VerifierKey()))
	tb.do(chromedp.Click(chromedp.CSS(`.paste-key button[type="submit"]`)))
	tb.waitJS(`document.querySelector('#verdict')?.classList.contains('ok') && !document.querySelector('.key-mismatch')`)

	// Replay links both ways: an invocation and its replay, each verified.
	call, err := s.ledger.Dispatch(context.Background(), "call-1", []byte(`{"type":"invocation","object_key":"echo-row","input":{"word":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.ledger.Dispatch(context.Background(), "call-2", []byte(`{"type":"invocation","object_key":"echo-row","input":{"word":"hi"},"replay_of":"`+call.InvID+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	tb.do(chromedp.Navigate(s.url + "/console/#/ledger/" + call.InvID))
	tb.waitJS(`document.querySelector('#verdict')?.classList.contains('ok')`)
	tb.do(chromedp.Click(chromedp.CSS(`.summary .links a[href="#/ledger/` + again.InvID + `"]`)))
	// The page of the replay, not the one it replaced: its title names it.
	tb.waitJS(`location.hash === '#/ledger/` + again.InvID + `' && document.querySelector('h1.run-id')?.textContent === '` + again.InvID + `' && document.querySelector('#verdict')?.classList.contains('ok')`)
	if got := tb.text(".summary .links"); !strings.Contains(got, "replays") {
		t.Fatalf("the replay's links read %q", got)
	}
	tb.shot("receipt-replay")
	tb.do(chromedp.Click(chromedp.CSS(`.summary .links a[href="#/ledger/` + call.InvID + `"]`)))
	tb.waitJS(`location.hash === '#/ledger/` + call.InvID + `'`)
}

func rowBody(desc string) string {
	return `{"type":"directory_row","command":"echo","description":"` + desc + `","args":[{"name":"word","type":"string","required":true}]}`
}

// The workflows page lists a workflow's versions, newest first, with
// their active runs, and a run's page names the version it is pinned to:
// a changed definition served from the store of an older one, with runs
// pinned to each.
func TestWorkflowVersionsShown(t *testing.T) {
	src := func(extra string) []byte {
		return []byte("workflow_id: versioned-v1\ninitial_state: INITIAL\nstates: {INITIAL: {}, " + extra + "DONE: {}}\n" +
			"transitions: [{from: INITIAL, action: finish, to: DONE}]\n")
	}
	v1, err := workflow.Load("v1.yaml", src(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := workflow.Load("v2.yaml", src("REVIEW: {}, "), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	old, err := engine.New(st, []*workflow.Definition{v1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var onV1 []string
	for range 2 {
		r, err := old.StartRun(context.Background(), "versioned-v1", nil, engine.StartOptions{Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		onV1 = append(onV1, r.ID)
	}
	s := newServerOn(t, st, append([]*workflow.Definition{v2}, examples.All()...), nil)
	onV2 := s.start(t, "versioned-v1")

	tb := newTab(t, "versions")
	tb.do(chromedp.Navigate(s.url + "/console/#/workflows"))
	card := `[...document.querySelectorAll('.workflow-list .card')].find((c) => c.querySelector('h2')?.textContent === 'versioned-v1')`
	tb.waitJS(card + `?.querySelectorAll('table.versions tbody tr').length === 2`)
	got := tb.eval(`[...` + card + `.querySelectorAll('table.versions tbody tr')].map((tr) => tr.cells[0].title + '=' + tr.cells[1].textContent).join(' ')`)
	if want := v2.Version() + "=1 " + v1.Version() + "=2"; got != want {
		t.Fatalf("versions (version=active runs) %s, want %s", got, want)
	}
	tb.shot("workflow-versions")
	for id, v := range map[string]string{onV1[0]: v1.Version(), onV2: v2.Version()} {
		tb.do(chromedp.Navigate(s.url + "/console/#/runs/" + id))
		tb.waitJS(`document.querySelector('h1.run-id')?.textContent === ` + strconv.Quote(id) + ` && [...document.querySelectorAll('.summary dd')].some((d) => d.title === ` + strconv.Quote(v) + `)`)
	}
}

// A browser opening a console address that holds no file gets a page in
// the console's style (its stylesheet loads under the CSP) that links back
// to the console.
func TestNotFoundPage(t *testing.T) {
	s := newServer(t, nil)
	tb := newTab(t, "not-found")
	tb.do(chromedp.Navigate(s.url + "/console/js/deep/nope.js"))
	tb.waitJS(`document.querySelector('h1')?.textContent === 'Not found' && document.styleSheets.length === 1 && document.styleSheets[0].cssRules.length > 0`)
	if got := tb.text(".notice.error"); !strings.Contains(got, "/console/js/deep/nope.js") {
		t.Fatalf("the page reads %q", got)
	}
	tb.shot("not-found")
	if got := tb.eval(`document.querySelector('.notice.error a').href`); got != s.url+"/console/" {
		t.Fatalf("the page links to %s", got)
	}
}

// The run page shows each pending timer with its time left (from the
// frame's timer links), counting down, and drops it once the run leaves
// the state. The rendering itself (timerLines) is checked in the page
// against fixed times.
func TestRunPageShowsTimers(t *testing.T) {
	def, err := workflow.Load("review.yaml", []byte("workflow_id: review-v1\ninitial_state: REVIEW\n"+
		"states: {REVIEW: {timers: [{after: 10m, action: escalate}]}, DONE: {}}\n"+
		"transitions: [{from: REVIEW, action: approve, to: DONE}, {from: REVIEW, action: escalate, to: DONE}]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newServerOn(t, memstore.New(), []*workflow.Definition{def}, nil)
	r, err := s.eng.StartRun(context.Background(), "review-v1", nil, engine.StartOptions{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	due := r.CreatedAt.Add(10 * time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)
	tb := newTab(t, "timers")
	tb.do(chromedp.Navigate(s.url + "/console/#/runs/" + r.ID))
	tb.waitJS(`/^escalate in (9m5\ds|10m0s) \(at ` + strings.ReplaceAll(due, "-", `\-`) + `\)$/.test(document.querySelector('#run-timers')?.innerText.trim() || '')`)
	first := tb.text("#run-timers")
	tb.waitJS(`document.querySelector('#run-timers')?.innerText !== ` + strconv.Quote(first)) // it counts down
	tb.shot("run-timers")
	got, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`import('/console/js/run.js').then((m) => m.timerLines({_links: {
		self: {href: 'x', method: 'GET'},
		'timer:expire': {href: 'x', method: 'POST', due_at: '2026-12-04T10:00:00Z'},
		'timer:escalate': {href: 'x', method: 'POST', due_at: '2026-12-03T10:30:00.5Z'},
		'timer:broken': {href: 'x', method: 'POST', due_at: 'soon'}}}, Date.parse('2026-12-03T10:20:02Z')).join(' | '))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if want := "escalate in 9m59s (at 2026-12-03T10:30:00Z) | expire in 23h39m58s (at 2026-12-04T10:00:00Z)"; got != want {
		t.Fatalf("timerLines = %q, want %q", got, want)
	}
	if _, err := s.eng.Transition(context.Background(), r.ID, "approve", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.waitJS(`document.querySelector('#run-state')?.textContent === 'DONE' && !document.querySelector('#run-timers')`)
}
