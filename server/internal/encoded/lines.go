package encoded

import (
	"sync"
	"sync/atomic"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// EventLine returns the NDJSON stream line (a frame plus "id", with the
// trailing newline) that shows the run of workflow def right after ev, with
// its hrefs under base.
func EventLine(e *engine.Engine, def *workflow.Definition, ev *store.Event, base string) ([]byte, error) {
	f, err := e.EventFrame(def, ev, base)
	if err != nil {
		return nil, err
	}
	return FrameLine(ev.Seq, f)
}

// FrameLine returns the NDJSON stream line of frame f with id id, with the
// trailing newline.
func FrameLine(id int64, f protocol.Frame) ([]byte, error) {
	return AppendFrameLine(make([]byte, 0, 1024), id, f)
}

// AppendFrameLine appends FrameLine(id, f) to dst (a stream replaying its
// backlog encodes every frame into one buffer).
func AppendFrameLine(dst []byte, id int64, f protocol.Frame) ([]byte, error) {
	b, err := protocol.StreamFrame{ID: id, Frame: f}.AppendJSON(dst)
	if err != nil {
		return nil, &protocol.Error{Code: protocol.EInternal, Hint: "could not encode a stream frame", Err: err}
	}
	return append(b, '\n'), nil
}

// Bounds of Lines: how many published events, and how many bytes of their
// data and lines in all.
const (
	maxLineEvents = 1024
	maxLineBytes  = 16 << 20
)

// Lines shares the stream lines of published events among the subscribers
// of a run, so that a thousand subscribers cost one encoding, not a
// thousand. The engine's hub hands every subscriber of one publication the
// same *store.Event (engine.Message): Lines keys its lines by that pointer,
// one per base URL. It keeps the most recent events only, bounded in count
// and bytes; an event it forgot is encoded again. It is safe for
// concurrent use.
type Lines struct {
	m     sync.Map // *store.Event -> *lineSet
	n     atomic.Int64
	bytes atomic.Int64
}

// lineSet holds the lines of one published event, by base URL.
type lineSet struct {
	mu    sync.Mutex
	lines map[string][]byte
	size  int64 // bytes counted for the event: its data and its lines
	gone  bool  // trimmed: what is added now is not counted
}

// Line returns EventLine(e, def, ev, base), encoded once for every caller
// that passes the same ev and base. Do not modify the returned slice; ev
// must not change once published.
func (l *Lines) Line(e *engine.Engine, def *workflow.Definition, ev *store.Event, base string) ([]byte, error) {
	s := l.set(ev)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.lines[base]; ok {
		return b, nil
	}
	b, err := EventLine(e, def, ev, base)
	if err != nil {
		return nil, err
	}
	if s.lines == nil {
		s.lines = make(map[string][]byte, 1)
	}
	s.lines[base] = b
	if !s.gone {
		s.size += int64(len(b))
		l.bytes.Add(int64(len(b)))
	}
	return b, nil
}

// set returns ev's lineSet, new (and counted) when ev is.
func (l *Lines) set(ev *store.Event) *lineSet {
	if v, ok := l.m.Load(ev); ok {
		return v.(*lineSet)
	}
	v, loaded := l.m.LoadOrStore(ev, &lineSet{size: int64(len(ev.Data))})
	if !loaded {
		l.n.Add(1)
		l.bytes.Add(int64(len(ev.Data)))
		l.trim()
	}
	return v.(*lineSet)
}

// trim forgets about half of the events when over a bound, whichever the
// map yields first.
func (l *Lines) trim() {
	if l.n.Load() <= maxLineEvents && l.bytes.Load() <= maxLineBytes {
		return
	}
	l.m.Range(func(k, v any) bool {
		if l.m.CompareAndDelete(k, v) {
			s := v.(*lineSet)
			s.mu.Lock()
			l.n.Add(-1)
			l.bytes.Add(-s.size)
			s.gone = true
			s.mu.Unlock()
		}
		return l.n.Load() > maxLineEvents/2 || l.bytes.Load() > maxLineBytes/2
	})
}
