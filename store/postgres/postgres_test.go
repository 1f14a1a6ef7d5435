package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/storetest"
)

// testURL returns the server named by ASMP_TEST_POSTGRES. Without it the
// test is skipped locally and fails in CI (CI set), where skipping would
// hide the Postgres backend from the conformance suite.
func testURL(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the Postgres store's tests need a server (scripts/test runs them)")
	}
	u := os.Getenv("ASMP_TEST_POSTGRES")
	if u != "" {
		return u
	}
	if os.Getenv("CI") != "" {
		t.Fatal(`ASMP_TEST_POSTGRES is not set, and CI is: start a server first with eval "$(scripts/postgres-up | tail -n1)"`)
	}
	t.Skip(`ASMP_TEST_POSTGRES is not set; run eval "$(scripts/postgres-up | tail -n1)" to test the Postgres store`)
	return ""
}

// freshSchema returns the name of a new, empty schema that is dropped when
// the test ends (after the stores opened on it are closed, as cleanups run
// last-registered first).
func freshSchema(t *testing.T, u string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "asmp_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// open opens a store on schema and closes it when the test ends.
func open(t *testing.T, u, schema string, o *postgres.Options) *postgres.Store {
	t.Helper()
	if o == nil {
		o = &postgres.Options{}
	}
	o.Schema = schema
	s, err := postgres.Open(t.Context(), u, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	u := testURL(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		schema := freshSchema(t, u)
		s, err := postgres.Open(t.Context(), u, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return s // the suite closes it
	})
}

// TestConcurrentOpen: replicas starting at once apply each migration once.
func TestConcurrentOpen(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(t.Context(), u, &postgres.Options{Schema: schema})
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := open(t, u, schema, nil) // and reopening is a no-op
	if s.Schema() != schema {
		t.Fatalf("Schema() = %q, want %q", s.Schema(), schema)
	}
	if d := s.String(); !strings.HasPrefix(d, "postgres postgres@") || !strings.HasSuffix(d, "(schema "+schema+")") {
		t.Fatalf("String() = %q", d)
	}
	withPW, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, set := withPW.User.Password(); !set {
		// trust auth ignores the password: show that String never has one.
		withPW.User = url.UserPassword(withPW.User.Username(), "s3cr3t-pw")
		s2 := open(t, withPW.String(), schema, nil)
		if strings.Contains(s2.String(), "s3cr3t") {
			t.Fatalf("String() shows the password: %q", s2.String())
		}
	}
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var count, max int
	if err := conn.QueryRow(t.Context(), `SELECT COUNT(*), MAX(version) FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&count, &max); err != nil {
		t.Fatal(err)
	}
	// One row per migration file (their numbers may have gaps: each
	// feature takes its own), up to the last one.
	files, _ := filepath.Glob(filepath.Join("migrations", "*.sql"))
	last := 0
	if len(files) > 0 {
		last, _ = strconv.Atoi(strings.SplitN(filepath.Base(files[len(files)-1]), "_", 2)[0])
	}
	if count != len(files) || max != last || count < 1 {
		t.Fatalf("schema_migrations has %d rows up to version %d; the migrations are %d files up to %d", count, max, len(files), last)
	}
}

// TestExactBytesAndTimes: data and bodies keep their exact bytes (json,
// not jsonb), milestones and microsecond times round-trip.
func TestExactBytesAndTimes(t *testing.T) {
	u := testURL(t)
	s := open(t, u, freshSchema(t, u), nil)
	ctx := t.Context()
	c := storetest.NewRun("bytes")
	when := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	c.Run.CreatedAt, c.Run.UpdatedAt, c.Event.Time = when, when, when
	c.Run.Data = json.RawMessage(`{ "z" : 1,"a":[1, 2.50, "\u00e9"],  "z2":{} }`)
	c.Event.Data = c.Run.Data
	if err := s.CreateRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetRun(ctx, "bytes")
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Data) != string(c.Run.Data) {
		t.Fatalf("data = %s, want the exact bytes %s", r.Data, c.Run.Data)
	}
	if r.Milestones != nil {
		t.Fatalf("milestones = %#v, want nil", r.Milestones)
	}
	want := when.Truncate(time.Microsecond)
	if !r.CreatedAt.Equal(want) || r.CreatedAt.Location() != time.UTC {
		t.Fatalf("created = %v, want %v in UTC", r.CreatedAt, want)
	}
	evs, _ := s.Events(ctx, "bytes", 0, 0)
	if len(evs) != 1 || string(evs[0].Data) != string(c.Run.Data) || !evs[0].Time.Equal(want) {
		t.Fatalf("event = %+v", evs)
	}
	body := `{"type":"directory_row",  "x": [true, null]}`
	rec, _, err := s.AppendLedgerSigned(ctx, "k", func(p store.LedgerPrev) (store.LedgerRecord, error) {
		r := storetest.Record(p, "k", "directory_row", "inv_bytes")
		r.Body = json.RawMessage(body)
		return r, nil
	}, storetest.Sign)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.LedgerRecord(ctx, rec.InvID)
	if err != nil || string(got.Body) != body {
		t.Fatalf("body = %s, %v; want the exact bytes %s", got.Body, err, body)
	}
	// Invalid JSON is refused, not stored.
	bad := storetest.Next(r, "x", "Y", `{"unterminated":`)
	if err := s.CommitRun(ctx, 1, bad).Wait(); err == nil || errors.Is(err, store.ErrConflict) {
		t.Fatalf("invalid JSON commit = %v, want a database error", err)
	}
	if r2, _ := s.GetRun(ctx, "bytes"); r2.Version != 1 {
		t.Fatalf("a refused commit changed the run: %+v", r2)
	}
}

// TestKeyOrderIsBytewise: LedgerLatest pages in byte order whatever the
// database collation.
func TestKeyOrderIsBytewise(t *testing.T) {
	u := testURL(t)
	s := open(t, u, freshSchema(t, u), nil)
	keys := []string{"b", "B", "a-b", "a_b", "ab", "A", "é"}
	for i, k := range keys {
		_, _, err := s.AppendLedgerSigned(t.Context(), k, func(p store.LedgerPrev) (store.LedgerRecord, error) {
			return storetest.Record(p, k, "directory_row", fmt.Sprintf("inv_%d", i)), nil
		}, storetest.Sign)
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.LedgerLatest(t.Context(), "directory_row", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Key)
	}
	want := append([]string{}, keys...)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("keys = %q, want byte order %q", got, want)
	}
}

// Two *Store on one database are two replicas: their pools share nothing.

func TestReplicasConcurrentCAS(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a, b := open(t, u, schema, nil), open(t, u, schema, nil)
	ctx := t.Context()
	if err := a.CreateRun(ctx, storetest.NewRun("shared")); err != nil {
		t.Fatal(err)
	}
	const perReplica, each = 4, 15
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	errs := make(chan error, 2*perReplica)
	for i, s := range []*postgres.Store{a, b, a, b, a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < each; {
				r, err := s.GetRun(ctx, "shared")
				if err != nil {
					errs <- err
					return
				}
				err = s.CommitRun(ctx, r.Version, storetest.Next(r, fmt.Sprintf("w%d", i), "LOOP", `{}`)).Wait()
				if errors.Is(err, store.ErrConflict) {
					conflicts.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				n++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const total = 1 + 2*perReplica*each
	r, _ := b.GetRun(ctx, "shared")
	if r.Version != total {
		t.Fatalf("version = %d, want %d: an update was lost", r.Version, total)
	}
	evs, _ := a.Events(ctx, "shared", 0, 0)
	if len(evs) != total {
		t.Fatalf("%d events, want %d", len(evs), total)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	t.Logf("%d lost compare-and-sets retried", conflicts.Load())
}

func TestReplicasLedgerSeq(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a, b := open(t, u, schema, nil), open(t, u, schema, nil)
	const n = 80
	var wg sync.WaitGroup
	seqs := make(chan int64, n)
	var refused atomic.Int64
	for i := 0; i < n; i++ {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("key-%d", i%5)
			r, _, err := s.AppendLedgerSigned(t.Context(), key, func(p store.LedgerPrev) (store.LedgerRecord, error) {
				if i%9 == 0 { // some builders refuse: they must leave no gap
					return store.LedgerRecord{}, errors.New("refused")
				}
				return storetest.Record(p, key, "directory_row", fmt.Sprintf("inv_%d", i)), nil
			}, storetest.Sign)
			if err != nil {
				if err.Error() == "refused" {
					refused.Add(1)
					return
				}
				t.Error(err)
				return
			}
			seqs <- r.Seq
		}()
	}
	wg.Wait()
	close(seqs)
	var got []int
	for q := range seqs {
		got = append(got, int(q))
	}
	sort.Ints(got)
	if len(got)+int(refused.Load()) != n {
		t.Fatalf("%d appended + %d refused, want %d", len(got), refused.Load(), n)
	}
	for i, q := range got {
		if q != i+1 {
			t.Fatalf("seqs = %v: want 1..%d with no gap or duplicate", got, len(got))
		}
	}
	if size, _ := b.LedgerSize(t.Context()); size != int64(len(got)) {
		t.Fatalf("LedgerSize = %d, want %d", size, len(got))
	}
	for k := 0; k < 5; k++ {
		h, _ := a.LedgerHistory(t.Context(), fmt.Sprintf("key-%d", k), 0, 0)
		for i := 1; i < len(h); i++ {
			if h[i].Supersedes != h[i-1].InvID {
				t.Fatalf("key-%d record %d supersedes %q, want %q", k, i, h[i].Supersedes, h[i-1].InvID)
			}
		}
	}
}

func TestReplicasClaim(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a, b := open(t, u, schema, nil), open(t, u, schema, nil)
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 40
	for i := 0; i < n; i++ {
		c := storetest.NewRun(fmt.Sprintf("r%02d", i))
		c.Enqueue = &store.Task{ID: c.Run.ID + ".1", RunID: c.Run.ID, State: "WORK", Version: 1, Status: store.TaskPending, CreatedAt: t0, UpdatedAt: t0}
		if err := a.CreateRun(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if claimed := storetest.ClaimAll(t, []store.TaskStore{a, b, a, b, a, b}, t0); len(claimed) != n {
		t.Fatalf("claimed %d tasks, want %d", len(claimed), n)
	}
	// Expired leases are reclaimed exactly once too.
	reclaimed := storetest.ClaimAll(t, []store.TaskStore{a, b, a, b}, t0.Add(2*time.Hour))
	if len(reclaimed) != n {
		t.Fatalf("reclaimed %d tasks, want %d", len(reclaimed), n)
	}
	for id, tk := range reclaimed {
		if tk.Attempts != 2 {
			t.Errorf("reclaimed %s at attempt %d, want 2", id, tk.Attempts)
		}
	}
}

type note struct {
	run     string
	version int64
}

// listen runs s.Listen until the test ends and returns its notifications.
func listen(t *testing.T, s *postgres.Store) <-chan note {
	ch := make(chan note, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Listen(ctx, func(id string, v int64) { ch <- note{id, v} }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	})
	return ch
}

// waitListening waits until a backend with that application_name is
// listening, so no notification is sent before LISTEN is in effect: idle
// after its LISTEN, or after one of the listener's pings (which replace
// the last query pg_stat_activity shows).
func waitListening(t *testing.T, u, app string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT COUNT(*) FROM pg_stat_activity
			WHERE application_name = $1 AND (query LIKE 'LISTEN %' OR query = '-- ping') AND state = 'idle'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no backend %q is listening", app)
}

// withApp returns u with application_name set.
func withApp(t *testing.T, u, app string) string {
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set("application_name", app)
	p.RawQuery = q.Encode()
	return p.String()
}

// expect waits for run's notification of version; within only turns a
// hang into a failure (callers give 10 s, for a loaded machine).
func expect(t *testing.T, ch <-chan note, run string, version int64, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case n := <-ch:
			if n.run != run {
				continue // another test's schema shares the channel
			}
			if n.version != version {
				t.Fatalf("notification %s:%d, want version %d", n.run, n.version, version)
			}
			return
		case <-timeout:
			t.Fatalf("no notification for %s:%d within %v", run, version, within)
		}
	}
}

func TestListenAcrossReplicas(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	app := "asmp-test-" + schema
	a := open(t, u, schema, nil)
	b := open(t, withApp(t, u, app), schema, nil)
	ch := listen(t, b)
	waitListening(t, u, app+" listen")

	ctx := t.Context()
	c := storetest.NewRun("note-" + schema)
	start := time.Now()
	if err := a.CreateRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, c.Run.ID, 1, 10*time.Second)
	// A lost compare-and-set notifies nothing; each commit notifies once, in order.
	next := storetest.Next(c.Run, "go", "B", `{}`)
	if err := a.CommitRun(ctx, 1, next).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := a.CommitRun(ctx, 1, storetest.Next(c.Run, "late", "C", `{}`)).Wait(); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale commit = %v", err)
	}
	if err := b.CommitRun(ctx, 2, storetest.Next(next.Run, "again", "D", `{}`)).Wait(); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, c.Run.ID, 2, 10*time.Second)
	expect(t, ch, c.Run.ID, 3, 10*time.Second)
	t.Logf("three notifications in %v", time.Since(start))
	select {
	case n := <-ch:
		if n.run == c.Run.ID {
			t.Fatalf("unexpected notification %+v", n)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

func TestListenReconnects(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	app := "asmp-test-" + schema
	resumed := make(chan struct{}, 4)
	a := open(t, u, schema, nil)
	b := open(t, withApp(t, u, app), schema, &postgres.Options{OnListenResume: func() { resumed <- struct{}{} }})
	ch := listen(t, b)
	waitListening(t, u, app+" listen")

	// Kill the listener's backend, as a restart or a network cut would.
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var killed int
	if err := conn.QueryRow(t.Context(), `SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) k`, app+" listen").Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listeners, %v", killed, err)
	}
	select {
	case <-resumed:
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not reconnect")
	}
	waitListening(t, u, app+" listen")
	c := storetest.NewRun("again-" + schema)
	if err := a.CreateRun(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, c.Run.ID, 1, 10*time.Second)
}

func TestListenStopsOnClose(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	app := "asmp-test-" + schema
	s, err := postgres.Open(t.Context(), withApp(t, u, app), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Listen(context.Background(), func(string, int64) {}) }()
	waitListening(t, u, app+" listen")
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Listen after Close = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Listen still running after Close")
	}
}

func TestPing(t *testing.T) {
	u := testURL(t)
	s := open(t, u, freshSchema(t, u), nil)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestErrorsHideThePassword needs no server: nothing reaches port 1.
func TestErrorsHideThePassword(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, u := range []string{
		"postgres://asmp:" + secret + "@127.0.0.1:1/asmp?sslmode=disable&connect_timeout=2",
		"postgres://asmp:" + secret + "@127.0.0.1:notaport/asmp",
		"postgres://asmp:" + secret + "@127.0.0.1:1/asmp?pool_max_conns=nope",
	} {
		_, err := postgres.Open(context.Background(), u, nil)
		if err == nil {
			t.Fatalf("Open succeeded on a closed port")
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error shows the password: %v", err)
		}
	}
}

// TestListenSurvivesPings: quiet periods only ping the connection; they
// neither drop notifications nor count as a reconnect.
func TestListenSurvivesPings(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	app := "asmp-test-" + schema
	var resumes atomic.Int64
	a := open(t, u, schema, nil)
	b := open(t, withApp(t, u, app), schema, &postgres.Options{
		ListenPingInterval: 20 * time.Millisecond,
		OnListenResume:     func() { resumes.Add(1) },
	})
	ch := listen(t, b)
	waitListening(t, u, app+" listen")
	time.Sleep(300 * time.Millisecond) // about 15 pings
	c := storetest.NewRun("quiet-" + schema)
	if err := a.CreateRun(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, c.Run.ID, 1, 10*time.Second)
	if n := resumes.Load(); n != 0 {
		t.Fatalf("%d reconnects during quiet periods, want 0", n)
	}
}

// TestUnstorableText: a failure message with a NUL byte or invalid UTF-8
// (say, a command's output) is stored with U+FFFD instead of failing the
// commit that records the failure.
func TestUnstorableText(t *testing.T) {
	u := testURL(t)
	s := open(t, u, freshSchema(t, u), nil)
	c := storetest.NewRun("nul")
	if err := s.CreateRun(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	next := storetest.Next(c.Run, "fail", "FAILED", `{}`)
	next.Run.Status, next.Run.Error = "failed", "boom\x00 \xff!"
	next.Event.Snapshot = next.Run.Snapshot
	if err := s.CommitRun(t.Context(), 1, next).Wait(); err != nil {
		t.Fatal(err)
	}
	r, _ := s.GetRun(t.Context(), "nul")
	evs, _ := s.Events(t.Context(), "nul", 1, 0)
	if r.Error != "boom\uFFFD \uFFFD!" || len(evs) != 1 || evs[0].Error != r.Error {
		t.Fatalf("error = %q, event %+v", r.Error, evs)
	}
}

func TestLedgerCheckpointsConformance(t *testing.T) {
	u := testURL(t)
	storetest.RunLedgerCheckpoints(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(t.Context(), u, &postgres.Options{Schema: freshSchema(t, u)})
		if err != nil {
			t.Fatal(err)
		}
		return s // the suite closes it
	})
}
