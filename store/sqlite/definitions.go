package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/asmp-dev/asmp/store"
)

const defCols = `workflow_id, version, body, first_served, legacy_runs`

func scanDef(sc scanner) (store.Definition, error) {
	var d store.Definition
	var body string
	var first int64
	if err := sc.Scan(&d.WorkflowID, &d.Version, &body, &first, &d.LegacyRuns); err != nil {
		return store.Definition{}, err
	}
	d.Body = json.RawMessage(body)
	d.FirstServed = fromNanos(first)
	return d, nil
}

// PutDefinition implements store.DefinitionStore.
func (s *Store) PutDefinition(ctx context.Context, d store.Definition) (store.Definition, error) {
	var out store.Definition
	err := s.write(ctx, func(tx wtx) error {
		if _, err := tx.Exec(`INSERT INTO definitions (`+defCols+`) VALUES (?, ?, ?, ?, ?) ON CONFLICT (workflow_id, version) DO NOTHING`,
			d.WorkflowID, d.Version, string(d.Body), nanos(d.FirstServed), d.LegacyRuns); err != nil {
			return fmt.Errorf("sqlite: put definition: %w", err)
		}
		var err error
		out, err = scanDef(tx.QueryRow(`SELECT `+defCols+` FROM definitions WHERE workflow_id = ? AND version = ?`, d.WorkflowID, d.Version))
		if err != nil {
			return fmt.Errorf("sqlite: put definition: %w", err)
		}
		return nil
	})
	return out, err
}

// GetDefinition implements store.DefinitionStore.
func (s *Store) GetDefinition(ctx context.Context, workflowID, version string) (store.Definition, error) {
	d, err := scanDef(s.queryRow(ctx, `SELECT `+defCols+` FROM definitions WHERE workflow_id = ? AND version = ?`, workflowID, version))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Definition{}, fmt.Errorf("sqlite: definition %s %s: %w", workflowID, version, store.ErrNotFound)
	}
	if err != nil {
		return store.Definition{}, fmt.Errorf("sqlite: get definition: %w", err)
	}
	return d, nil
}

// Definitions implements store.DefinitionStore.
func (s *Store) Definitions(ctx context.Context, workflowID string) ([]store.Definition, error) {
	rows, err := s.query(ctx, `SELECT `+defCols+` FROM definitions WHERE workflow_id = ? ORDER BY first_served DESC, version DESC`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: definitions: %w", err)
	}
	defer rows.Close()
	out := []store.Definition{}
	for rows.Next() {
		d, err := scanDef(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: definitions: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// PinCounts implements store.DefinitionStore.
func (s *Store) PinCounts(ctx context.Context, workflowID string) ([]store.PinCount, error) {
	rows, err := s.query(ctx, `SELECT workflow_version, state, status, COUNT(*) FROM runs WHERE workflow_id = ? GROUP BY workflow_version, state, status`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: pin counts: %w", err)
	}
	defer rows.Close()
	out := []store.PinCount{}
	for rows.Next() {
		var c store.PinCount
		if err := rows.Scan(&c.Version, &c.State, &c.Status, &c.Runs); err != nil {
			return nil, fmt.Errorf("sqlite: pin counts: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// PinnedRuns implements store.DefinitionStore.
func (s *Store) PinnedRuns(ctx context.Context, workflowID, version, after string, limit int) ([]store.Run, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.query(ctx, `SELECT `+runCols+` FROM runs WHERE workflow_id = ? AND workflow_version = ? AND id > ? ORDER BY id LIMIT ?`,
		workflowID, version, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: pinned runs: %w", err)
	}
	defer rows.Close()
	out := []store.Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: pinned runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// PinLegacyRuns implements store.DefinitionStore.
func (s *Store) PinLegacyRuns(ctx context.Context, workflowID, version string) (int64, error) {
	var ids []string
	err := s.queue(ctx, func(tx wtx) error {
		ids = ids[:0]
		var one int
		err := tx.QueryRow(`SELECT 1 FROM definitions WHERE workflow_id = ? AND version = ?`, workflowID, version).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: definition %s %s: %w", workflowID, version, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: pin legacy runs: %w", err)
		}
		rows, err := s.wconn.QueryContext(context.Background(), `UPDATE runs SET workflow_version = ? WHERE workflow_id = ? AND workflow_version = '' RETURNING id`, version, workflowID)
		if err != nil {
			return fmt.Errorf("sqlite: pin legacy runs: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: pin legacy runs: %w", err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("sqlite: pin legacy runs: %w", err)
		}
		if _, err := tx.Exec(`UPDATE definitions SET legacy_runs = legacy_runs + ? WHERE workflow_id = ? AND version = ?`, len(ids), workflowID, version); err != nil {
			return fmt.Errorf("sqlite: pin legacy runs: %w", err)
		}
		return nil
	}, &commitHook{ // the pinned runs are read again, with the pin
		before: func() {
			for _, id := range ids {
				s.runs.committing(id)
			}
		},
		after: func(bool) {
			for _, id := range ids {
				s.runs.done(id, nil, 0)
			}
		},
	}).Wait()
	if err != nil {
		return 0, err
	}
	return int64(len(ids)), nil
}

// PutMigration implements store.DefinitionStore.
func (s *Store) PutMigration(ctx context.Context, m store.Migration) error {
	states, err := json.Marshal(nonNilStates(m.States))
	if err != nil {
		return fmt.Errorf("sqlite: put migration: %w", err)
	}
	runs, err := json.Marshal(nonNilRuns(m.Runs))
	if err != nil {
		return fmt.Errorf("sqlite: put migration: %w", err)
	}
	return s.write(ctx, func(tx wtx) error {
		if _, err := tx.Exec(`INSERT INTO workflow_migrations (workflow_id, from_version, to_version, states, runs, actor, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (workflow_id, from_version) DO UPDATE SET to_version = excluded.to_version, states = excluded.states,
				runs = excluded.runs, actor = excluded.actor, created_at = excluded.created_at`,
			m.WorkflowID, m.From, m.To, string(states), string(runs), m.Actor, nanos(m.CreatedAt)); err != nil {
			return fmt.Errorf("sqlite: put migration: %w", err)
		}
		return nil
	})
}

// GetMigration implements store.DefinitionStore.
func (s *Store) GetMigration(ctx context.Context, workflowID, from string) (store.Migration, error) {
	m := store.Migration{WorkflowID: workflowID, From: from}
	var states, runs string
	var created int64
	err := s.queryRow(ctx, `SELECT to_version, states, runs, actor, created_at FROM workflow_migrations WHERE workflow_id = ? AND from_version = ?`,
		workflowID, from).Scan(&m.To, &states, &runs, &m.Actor, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Migration{}, fmt.Errorf("sqlite: migration of %s from %s: %w", workflowID, from, store.ErrNotFound)
	}
	if err != nil {
		return store.Migration{}, fmt.Errorf("sqlite: get migration: %w", err)
	}
	if err := json.Unmarshal([]byte(states), &m.States); err != nil {
		return store.Migration{}, fmt.Errorf("sqlite: get migration: %w", err)
	}
	if err := json.Unmarshal([]byte(runs), &m.Runs); err != nil {
		return store.Migration{}, fmt.Errorf("sqlite: get migration: %w", err)
	}
	m.CreatedAt = fromNanos(created)
	return m, nil
}

func nonNilStates(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilRuns(r []string) []string {
	if r == nil {
		return []string{}
	}
	return r
}
