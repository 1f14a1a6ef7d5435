package engine

import (
	"cmp"
	"context"

	"github.com/asmp-dev/asmp/store"

	"github.com/asmp-dev/asmp/protocol"
)

// Catalog describes the served workflows (only workflowID's, when not "")
// with start hrefs under rootBase.
func (e *Engine) Catalog(rootBase, workflowID string) []protocol.WorkflowInfo {
	out := []protocol.WorkflowInfo{}
	for _, d := range e.order {
		if workflowID != "" && d.ID != workflowID {
			continue
		}
		info := protocol.WorkflowInfo{WorkflowID: d.ID, Description: d.Description, InitialState: d.InitialState,
			StartHref: StartHref(rootBase, d.ID), Default: d == e.def, Version: d.Version()}
		for _, st := range d.States {
			info.States = append(info.States, st.Name)
		}
		out = append(out, info)
	}
	return out
}

// EventLog returns r's history after event after (0: from the start), at
// most limit entries (0: all), each with the status the run showed after it.
func (e *Engine) EventLog(ctx context.Context, r *Run, after int64, limit int) (*protocol.EventLog, error) {
	evs, err := e.Events(ctx, r.ID, after, limit)
	if err != nil {
		return nil, err
	}
	log := &protocol.EventLog{RunID: r.ID, WorkflowID: r.WorkflowID, Events: make([]protocol.Event, len(evs))}
	at := *r // follows the versions the run had, event by event
	for i := range evs {
		ev := &evs[i]
		e.FollowVersion(ctx, &at, ev)
		log.Events[i] = protocol.Event{ID: ev.Seq, Time: ev.Time.UTC(), Kind: ev.Kind, Action: ev.Action,
			From: ev.From, To: ev.To, Actor: ev.Actor, Status: StatusAfter(at.Def, ev), Reason: cmp.Or(ev.Reason, ev.Error), WorkflowVersion: ev.WorkflowVersion}
		if ev.Kind == store.EventMigrated {
			log.Events[i].Action, log.Events[i].FromVersion = "migrate", ev.Action
		}
	}
	return log, nil
}
