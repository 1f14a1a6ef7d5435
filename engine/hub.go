package engine

import (
	"sync"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// DefaultSubscriberBuffer is how many messages a stream subscriber may fall
// behind before it is cut off (and told to resume with Last-Event-ID).
const DefaultSubscriberBuffer = 256

// Message is one item delivered to a run's subscribers: a committed event
// or a progress report of a running task. Every subscriber of one
// publication receives the same Event pointer, so consumers may share
// what they derive from it (an encoding); the event must not be modified.
type Message struct {
	Event    *store.Event
	Progress *protocol.Progress
}

// Subscription receives a run's messages as they are published. C is closed
// when the subscription ends; Dropped then reports whether it was cut off
// for falling too far behind.
type Subscription struct {
	C       <-chan Message
	c       chan Message
	runID   string
	hub     *Hub
	mu      sync.Mutex
	closed  bool
	dropped bool
}

// Dropped reports whether the subscription was cut off because its reader
// fell more than its buffer behind.
func (s *Subscription) Dropped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Close ends the subscription.
func (s *Subscription) Close() { s.hub.remove(s, false) }

// Hub fans a run's messages out to its subscribers in-process. Publishing
// never blocks: a subscriber whose buffer is full is dropped.
type Hub struct {
	mu      sync.RWMutex
	subs    map[string]map[*Subscription]struct{}
	n       int // live subscriptions
	buffer  int // channel capacity per subscription
	onEmpty func(runID string)
}

func newHub() *Hub {
	return &Hub{subs: map[string]map[*Subscription]struct{}{}, buffer: DefaultSubscriberBuffer}
}

// Subscribe starts a subscription to runID's messages.
func (h *Hub) Subscribe(runID string) *Subscription {
	c := make(chan Message, h.buffer)
	s := &Subscription{C: c, c: c, runID: runID, hub: h}
	h.mu.Lock()
	m := h.subs[runID]
	if m == nil {
		m = map[*Subscription]struct{}{}
		h.subs[runID] = m
	}
	m[s] = struct{}{}
	h.n++
	h.mu.Unlock()
	return s
}

// Subscribers returns the number of live subscriptions.
func (h *Hub) Subscribers() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.n
}

// HasSubscribers reports whether runID has live subscriptions.
func (h *Hub) HasSubscribers(runID string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[runID]) > 0
}

func (h *Hub) remove(s *Subscription, dropped bool) {
	empty := false
	h.mu.Lock()
	if m := h.subs[s.runID]; m != nil {
		if _, ok := m[s]; ok {
			delete(m, s)
			h.n--
			if len(m) == 0 {
				delete(h.subs, s.runID)
				empty = true
			}
		}
	}
	h.mu.Unlock()
	if empty && h.onEmpty != nil {
		h.onEmpty(s.runID)
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.dropped = dropped
		close(s.c)
	}
	s.mu.Unlock()
}

// Publish delivers m to runID's subscribers without blocking.
func (h *Hub) Publish(runID string, m Message) {
	var slow []*Subscription
	h.mu.RLock()
	for s := range h.subs[runID] {
		select {
		case s.c <- m:
		default:
			slow = append(slow, s)
		}
	}
	h.mu.RUnlock()
	for _, s := range slow {
		h.remove(s, true)
	}
}

// CloseAll ends every subscription (on shutdown).
func (h *Hub) CloseAll() {
	h.mu.RLock()
	var all []*Subscription
	for _, m := range h.subs {
		for s := range m {
			all = append(all, s)
		}
	}
	h.mu.RUnlock()
	for _, s := range all {
		h.remove(s, false)
	}
}

// Hub returns the engine's subscriber hub.
func (e *Engine) Hub() *Hub { return e.hub }

// published is called after this process committed ev.
func (e *Engine) published(workflowID string, ev store.Event) {
	e.publishEvent(workflowID, ev, true)
}

// publishEvent delivers ev to the run's subscribers (once: events already
// published are skipped) and, for this process's own commits, reports it to
// the observers and wakes a task worker when the run entered a task state.
func (e *Engine) publishEvent(workflowID string, ev store.Event, local bool) {
	if local {
		e.obs.committed(workflowID, ev.Kind, ev.Action)
		if ev.Status == protocol.StatusProcessing {
			if wake := e.wakeFunc(); wake != nil {
				wake()
			}
		}
	}
	if !e.hub.HasSubscribers(ev.RunID) {
		return
	}
	if !e.seen.advance(ev.RunID, ev.Seq) && !local {
		return
	}
	m := Message{Event: new(store.Event)}
	*m.Event = ev // a copy on the heap only when there are subscribers
	e.hub.Publish(ev.RunID, m)
}

// Runs returns the ids of the runs that have subscribers.
func (h *Hub) Runs() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]string, 0, len(h.subs))
	for id := range h.subs {
		out = append(out, id)
	}
	return out
}
