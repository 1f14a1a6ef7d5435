package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
)

const defCols = `workflow_id, version, body, first_served, legacy_runs`

func scanDef(row pgx.Row) (store.Definition, error) {
	var d store.Definition
	var body []byte
	if err := row.Scan(&d.WorkflowID, &d.Version, &body, &d.FirstServed, &d.LegacyRuns); err != nil {
		return store.Definition{}, err
	}
	d.Body = json.RawMessage(body)
	d.FirstServed = utc(d.FirstServed)
	return d, nil
}

// PutDefinition implements store.DefinitionStore. Two replicas putting the
// same version at once both get the one stored first.
func (s *Store) PutDefinition(ctx context.Context, d store.Definition) (store.Definition, error) {
	var out store.Definition
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO definitions (`+defCols+`) VALUES ($1, $2, $3::json, $4, $5) ON CONFLICT (workflow_id, version) DO NOTHING`,
			d.WorkflowID, d.Version, string(d.Body), d.FirstServed, d.LegacyRuns); err != nil {
			return err
		}
		var err error
		out, err = scanDef(tx.QueryRow(ctx, `SELECT `+defCols+` FROM definitions WHERE workflow_id = $1 AND version = $2`, d.WorkflowID, d.Version))
		return err
	})
	if err != nil {
		return store.Definition{}, fmt.Errorf("postgres: put definition %s %s: %w", d.WorkflowID, d.Version, err)
	}
	return out, nil
}

// GetDefinition implements store.DefinitionStore.
func (s *Store) GetDefinition(ctx context.Context, workflowID, version string) (store.Definition, error) {
	d, err := scanDef(s.pool.QueryRow(ctx, `SELECT `+defCols+` FROM definitions WHERE workflow_id = $1 AND version = $2`, workflowID, version))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Definition{}, fmt.Errorf("postgres: definition %s %s: %w", workflowID, version, store.ErrNotFound)
	}
	if err != nil {
		return store.Definition{}, fmt.Errorf("postgres: get definition: %w", err)
	}
	return d, nil
}

// Definitions implements store.DefinitionStore.
func (s *Store) Definitions(ctx context.Context, workflowID string) ([]store.Definition, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+defCols+` FROM definitions WHERE workflow_id = $1 ORDER BY first_served DESC, version DESC`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("postgres: definitions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Definition, error) { return scanDef(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: definitions: %w", err)
	}
	return out, nil
}

// PinCounts implements store.DefinitionStore.
func (s *Store) PinCounts(ctx context.Context, workflowID string) ([]store.PinCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT workflow_version, state, status, COUNT(*) FROM runs WHERE workflow_id = $1 GROUP BY workflow_version, state, status`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("postgres: pin counts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.PinCount, error) {
		var c store.PinCount
		err := row.Scan(&c.Version, &c.State, &c.Status, &c.Runs)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: pin counts: %w", err)
	}
	return out, nil
}

// PinnedRuns implements store.DefinitionStore.
func (s *Store) PinnedRuns(ctx context.Context, workflowID, version, after string, limit int) ([]store.Run, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runCols+` FROM runs WHERE workflow_id = $1 AND workflow_version = $2 AND id > $3 ORDER BY id LIMIT $4`,
		workflowID, version, after, lim)
	if err != nil {
		return nil, fmt.Errorf("postgres: pinned runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: pinned runs: %w", err)
	}
	return out, nil
}

// PinLegacyRuns implements store.DefinitionStore.
func (s *Store) PinLegacyRuns(ctx context.Context, workflowID, version string) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Lock the definition's row: replicas starting at once pin in turn.
		var legacy int64
		if err := tx.QueryRow(ctx, `SELECT legacy_runs FROM definitions WHERE workflow_id = $1 AND version = $2 FOR UPDATE`, workflowID, version).Scan(&legacy); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE runs SET workflow_version = $1 WHERE workflow_id = $2 AND workflow_version = ''`, version, workflowID)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `UPDATE definitions SET legacy_runs = legacy_runs + $1 WHERE workflow_id = $2 AND version = $3`, n, workflowID, version)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("postgres: definition %s %s: %w", workflowID, version, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: pin legacy runs of %s: %w", workflowID, err)
	}
	return n, nil
}

// PutMigration implements store.DefinitionStore.
func (s *Store) PutMigration(ctx context.Context, m store.Migration) error {
	states := m.States
	if states == nil {
		states = map[string]string{}
	}
	runs := m.Runs
	if runs == nil {
		runs = []string{}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO workflow_migrations (workflow_id, from_version, to_version, states, runs, actor, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (workflow_id, from_version) DO UPDATE SET to_version = EXCLUDED.to_version, states = EXCLUDED.states,
				runs = EXCLUDED.runs, actor = EXCLUDED.actor, created_at = EXCLUDED.created_at`,
			m.WorkflowID, m.From, m.To, states, runs, m.Actor, m.CreatedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: put migration of %s from %s: %w", m.WorkflowID, m.From, err)
	}
	return nil
}

// GetMigration implements store.DefinitionStore.
func (s *Store) GetMigration(ctx context.Context, workflowID, from string) (store.Migration, error) {
	m := store.Migration{WorkflowID: workflowID, From: from}
	err := s.pool.QueryRow(ctx, `SELECT to_version, states, runs, actor, created_at FROM workflow_migrations WHERE workflow_id = $1 AND from_version = $2`,
		workflowID, from).Scan(&m.To, &m.States, &m.Runs, &m.Actor, &m.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Migration{}, fmt.Errorf("postgres: migration of %s from %s: %w", workflowID, from, store.ErrNotFound)
	}
	if err != nil {
		return store.Migration{}, fmt.Errorf("postgres: get migration: %w", err)
	}
	m.CreatedAt = utc(m.CreatedAt)
	return m, nil
}
