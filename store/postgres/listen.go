package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reconnect backoff of Listen.
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 10 * time.Second
)

// Listen implements store.Notifier. It holds one dedicated connection (not
// from the pool) with LISTEN asmp_runs and calls fn(runID, version), in
// commit order, for every run commit made by any process on the database,
// this one included. fn runs on Listen's goroutine: a slow fn delays later
// notifications (Postgres queues them meanwhile), it does not lose them.
//
// When the connection drops or stops answering pings, Listen reconnects
// with exponential backoff (100ms doubling to 10s, with jitter) and calls
// Options.OnListenResume once LISTEN is back. Notifications sent while it
// was disconnected are lost: a subscriber catches up from the event log
// (Events after the last seq it saw), which is the engine's job.
//
// Listen returns ctx.Err() when ctx ends, or context.Canceled once the
// store is closed. It never returns because of a connection failure.
func (s *Store) Listen(ctx context.Context, fn func(runID string, version int64)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.closing, cancel)
	defer stop()

	backoff := listenMinBackoff
	failed := false
	for {
		err := s.listenOnce(ctx, fn, func() {
			backoff = listenMinBackoff
			if failed && s.opts.OnListenResume != nil {
				s.opts.OnListenResume()
			}
			if failed {
				s.log.Info("postgres: listener reconnected", "channel", Channel)
			}
			failed = false
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failed = true
		wait := backoff/2 + rand.N(backoff/2+1)
		s.log.Warn("postgres: listener lost its connection; notifications are lost until it reconnects",
			"channel", Channel, "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*2, listenMaxBackoff)
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails or ctx ends. ready is called once LISTEN is in effect.
func (s *Store) listenOnce(ctx context.Context, fn func(string, int64), ready func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.listenCfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{Channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ready()
	for {
		wctx, cancel := context.WithTimeout(ctx, s.opts.ListenPingInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !pgconn.Timeout(err) || conn.IsClosed() {
				return fmt.Errorf("wait: %w", err)
			}
			// Quiet for a while: make sure the server is still there.
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("ping: %w", err)
			}
			continue
		}
		if n.Channel != Channel {
			continue
		}
		id, v, ok := parsePayload(n.Payload)
		if !ok {
			s.log.Warn("postgres: ignoring a malformed notification", "channel", Channel, "payload", truncate(n.Payload, 80))
			continue
		}
		fn(id, v)
	}
}

// parsePayload splits "<run id>:<version>".
func parsePayload(p string) (string, int64, bool) {
	i := strings.LastIndexByte(p, ':')
	if i <= 0 {
		return "", 0, false
	}
	v, err := strconv.ParseInt(p[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return p[:i], v, true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
