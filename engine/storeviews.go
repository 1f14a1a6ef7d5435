package engine

import (
	"context"

	"github.com/asmp-dev/asmp/store"
)

// The reads of the store that the edge makes around the use cases: lists,
// counts and readiness. They are the store's answers as they are.

// ListRuns returns the runs f selects (store.RunStore.ListRuns), their
// data included.
func (e *Engine) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	return e.store.ListRuns(ctx, f)
}

// CountRuns returns how many runs are stored, by workflow and stored
// status (store.RunStore.CountRuns).
func (e *Engine) CountRuns(ctx context.Context) ([]store.RunCount, error) {
	return e.store.CountRuns(ctx)
}

// PendingTasks returns how many background tasks are not done yet
// (store.TaskStore.PendingTasks).
func (e *Engine) PendingTasks(ctx context.Context) (int64, error) {
	return e.store.PendingTasks(ctx)
}

// PendingDeliveries returns how many webhook deliveries wait to be sent
// (store.WebhookStore.PendingDeliveries): the outbox's backlog, retries
// included, failed ones not.
func (e *Engine) PendingDeliveries(ctx context.Context) (int64, error) {
	return e.store.PendingDeliveries(ctx)
}

// StoredDefinitions returns every stored version of workflowID
// (store.DefinitionStore.Definitions).
func (e *Engine) StoredDefinitions(ctx context.Context, workflowID string) ([]store.Definition, error) {
	return e.store.Definitions(ctx, workflowID)
}

// Ping checks that the store answers, when it offers a readiness check
// (store.Pinger); ok is false when it offers none.
func (e *Engine) Ping(ctx context.Context) (ok bool, err error) {
	p, ok := e.store.(store.Pinger)
	if !ok {
		return false, nil
	}
	return true, p.Ping(ctx)
}
