package memstore

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// The runs live in three structures the garbage collector does not trace
// per run: records (runRec, pointer-free) in a slab addressed by slot; a
// map from the hash of a run's id to its slot (uint64 to int32: no
// pointers), with an exact-id check and an overflow map for the ids whose
// hash is taken; and the arena holding every byte of each run. The
// records' names (workflow, version, state, status) are ids into one
// table of interned strings, of which there are few whatever the number
// of runs.

// runRec is one stored run.
type runRec struct {
	hash uint64
	// cur holds the run's id (length-prefixed), then its current value
	// (appendRun); log its events back to back, each in its stored form
	// (see store.Event: whole, or a delta); idx, per event, where it
	// starts in log and the index of the last whole event at or before it.
	cur, log, idx span
	n             uint32 // events
	// patchBytes counts the patch bytes kept since the last whole event.
	patchBytes int64
	version    int64
	upSec      int64 // updated_at, the index's order
	upNsec     int32
	wf, ver    int32 // names
	status     int32
	state      int32
	// dataOff and dataLen locate in log the data of the latest event when
	// it is whole (dataLen < 0: it is a delta).
	dataOff uint32
	dataLen int32
	// timers is the slot+1 of the run's first pending timer (0: none;
	// see timers).
	timers int32
	live   bool
}

// maxLog bounds one run's encoded events (offsets are 32-bit).
const maxLog = math.MaxUint32

// names interns the workflow ids, versions, states and statuses of runs
// as int32 ids; id 0 is "".
type names struct {
	ids  map[string]int32
	strs []string
}

func newNames() names { return names{ids: map[string]int32{"": 0}, strs: []string{""}} }

// id returns name's id, interning it.
func (n *names) id(name string) int32 {
	if i, ok := n.ids[name]; ok {
		return i
	}
	i := int32(len(n.strs))
	n.strs = append(n.strs, name)
	n.ids[name] = i
	return i
}

// find returns name's id, or false when no run has ever had it.
func (n *names) find(name string) (int32, bool) {
	i, ok := n.ids[name]
	return i, ok
}

// The groups of the run index, one per filter a run list serves.
const (
	groupAll uint64 = iota << 56
	groupWorkflow
	groupState
	groupStatus
	groupWorkflowState
)

func groupOf(kind uint64, a, b int32) uint64 { return kind | uint64(uint32(a))<<28 | uint64(uint32(b)) }

// groups returns the index groups of a run with these names.
func groups(wf, state, status int32) [5]uint64 {
	return [5]uint64{groupAll, groupOf(groupWorkflow, wf, 0), groupOf(groupState, state, 0),
		groupOf(groupStatus, status, 0), groupOf(groupWorkflowState, wf, state)}
}

func timeKey(t time.Time) (int64, int32) { return t.Unix(), int32(t.Nanosecond()) }

// rec returns the record of slot.
func (s *Store) rec(slot int32) *runRec { return s.recs.at(slot) }

// idOf returns the id of the run in slot, aliasing the arena.
func (s *Store) idOf(slot int32) []byte {
	b := s.ar.bytes(s.rec(slot).cur)
	n, k := binary.Uvarint(b)
	return b[k : k+int(n)]
}

func (s *Store) hashID(id string) uint64 {
	if s.hashFn != nil {
		return s.hashFn(id)
	}
	return maphash.String(s.seed, id)
}

// lookup returns the slot of run id.
func (s *Store) lookup(id string) (int32, bool) {
	h := s.hashID(id)
	if slot, ok := s.byHash[h]; ok && string(s.idOf(slot)) == id {
		return slot, true
	}
	if s.overflow != nil {
		slot, ok := s.overflow[id]
		return slot, ok
	}
	return 0, false
}

// liveSpan returns where the record of slot keeps its span of kind, for
// the arena's compaction (nil for a free slot).
func (s *Store) liveSpan(slot int32, kind byte) *span {
	if slot < 0 || slot >= s.recs.n {
		return nil
	}
	e := s.rec(slot)
	if !e.live {
		return nil
	}
	switch kind {
	case kindCur:
		return &e.cur
	case kindLog:
		return &e.log
	case kindIdx:
		return &e.idx
	}
	return nil
}

// compact does the arena's share of compaction for a write of n bytes.
func (s *Store) compact(n int) {
	s.ar.compact(max(compactBudget, 2*n), s.liveSpan)
}

// keys returns the index entries of the run in slot.
func (s *Store) keys(slot int32) [5]ikey {
	e := s.rec(slot)
	var ks [5]ikey
	for i, g := range groups(e.wf, e.state, e.status) {
		ks[i] = ikey{group: g, sec: e.upSec, nsec: e.upNsec, slot: slot}
	}
	return ks
}

// index adds (add) or removes the entries of the run in slot.
func (s *Store) index(slot int32, add bool) {
	for _, k := range s.keys(slot) {
		if add {
			s.idx.insert(k)
			s.groupN[k.group]++
		} else if s.idx.delete(k) {
			s.uncount(k.group)
		}
	}
}

func (s *Store) uncount(g uint64) {
	if s.groupN[g]--; s.groupN[g] <= 0 {
		delete(s.groupN, g)
	}
}

// reindex moves the entries of the run in slot from old to what its
// record says now.
func (s *Store) reindex(slot int32, old [5]ikey) {
	for i, k := range s.keys(slot) {
		switch o := old[i]; {
		case o == k:
		case o.group == k.group:
			s.idx.move(o, k)
		default:
			if s.idx.delete(o) {
				s.uncount(o.group)
			}
			s.idx.insert(k)
			s.groupN[k.group]++
		}
	}
}

// newRun stores a new run with its first event.
func (s *Store) newRun(c *store.Commit) {
	slot := s.recs.alloc()
	e := s.rec(slot)
	*e = runRec{hash: s.hashID(c.Run.ID), live: true, dataLen: -1, wf: s.names.id(c.Run.WorkflowID)}
	if _, taken := s.byHash[e.hash]; taken {
		if s.overflow == nil {
			s.overflow = map[string]int32{}
		}
		s.overflow[c.Run.ID] = slot
	} else {
		s.byHash[e.hash] = slot
	}
	_ = s.appendEvent(slot, newEvent(c.Event, true)) // the first never fails
	s.setCurrent(slot, &c.Run)
	s.index(slot, true)
}

// dropRun removes the run in slot.
func (s *Store) dropRun(slot int32, id string) {
	s.index(slot, false)
	e := s.rec(slot)
	if s.overflow != nil {
		if _, ok := s.overflow[id]; ok {
			delete(s.overflow, id)
		} else {
			delete(s.byHash, e.hash)
		}
	} else {
		delete(s.byHash, e.hash)
	}
	for _, sp := range [...]span{e.cur, e.log, e.idx} {
		s.ar.release(sp)
	}
	s.recs.release(slot)
}

// setCurrent makes r the current value of the run in slot.
func (s *Store) setCurrent(slot int32, r *store.Run) {
	e := s.rec(slot)
	shared := false
	if data, ok := s.lastData(e); ok && r.Data != nil && string(data) == string(r.Data) {
		shared = true // the latest event holds the same data: keep it once
	}
	b := appendString(s.scratch[:0], r.ID)
	b = appendRun(b, r, shared)
	old := e.cur
	e.cur = s.ar.put(slot, kindCur, b)
	s.ar.release(old)
	s.keepScratch(b)
	e.version = r.Version
	e.ver = s.names.id(r.WorkflowVersion)
	e.status = s.names.id(r.Status)
	e.state = s.names.id(r.State)
	e.upSec, e.upNsec = timeKey(r.UpdatedAt)
}

// keepScratch keeps b's array for the next encoding unless it is large.
func (s *Store) keepScratch(b []byte) {
	if cap(b) <= 64<<10 {
		s.scratch = b[:0]
	}
}

// current returns the value of the run in slot, whose id is id.
func (s *Store) current(slot int32, id string) store.Run {
	e := s.rec(slot)
	r := store.Run{ID: id, WorkflowID: s.names.strs[e.wf], Version: e.version, WorkflowVersion: s.names.strs[e.ver]}
	d := decoder{b: s.ar.bytes(e.cur)}
	d.bytes() // the id
	r.Status = s.names.strs[e.status]
	d.bytes()
	d.bytes() // status and state, kept as names
	r.State = s.names.strs[e.state]
	r.Error = d.string()
	d.varint()
	for _, t := range [...]*time.Time{&r.CreatedAt, &r.UpdatedAt} {
		unix, full := d.time()
		*t = (&event{unix: unix, full: full}).time()
	}
	r.Milestones = d.strings()
	switch d.byte() {
	case 1:
		r.Data = d.bytes()
	case 2:
		r.Data, _ = s.lastData(e)
	}
	return r
}

// currentAt is current for a run found in the index.
func (s *Store) currentAt(slot int32) store.Run { return s.current(slot, string(s.idOf(slot))) }

// appendEvent adds ev as the latest event of the run in slot.
func (s *Store) appendEvent(slot int32, ev event) error {
	e := s.rec(slot)
	if e.log.n >= maxLog {
		return errLogFull
	}
	if e.n == 0 {
		ev.whole = true
	}
	b := appendEvent(s.scratch[:0], &ev)
	defer s.keepScratch(b)
	if uint64(e.log.n)+uint64(len(b)) > maxLog {
		return errLogFull
	}
	whole := e.n
	if ev.whole {
		e.patchBytes = 0
	} else {
		e.patchBytes += int64(len(ev.patch))
		ib := s.ar.bytes(e.idx)
		whole = binary.LittleEndian.Uint32(ib[len(ib)-4:])
	}
	start := e.log.n
	var ent [8]byte
	binary.LittleEndian.PutUint32(ent[:], start)
	binary.LittleEndian.PutUint32(ent[4:], whole)
	s.ar.write(slot, kindLog, &e.log, b)
	s.ar.write(slot, kindIdx, &e.idx, ent[:])
	e.n++
	e.dataLen = -1
	if ev.whole && ev.snap.Data != nil && len(ev.snap.Data) <= math.MaxInt32 {
		// The data sits just before the milestones and the offered
		// actions, at the end.
		tail := len(appendStrings(appendStrings(nil, ev.snap.Milestones), ev.offered))
		off := int(e.log.n) - tail - len(ev.snap.Data)
		if off >= int(start) && bytes.Equal(s.ar.bytes(e.log)[off:off+len(ev.snap.Data)], ev.snap.Data) {
			e.dataOff, e.dataLen = uint32(off), int32(len(ev.snap.Data))
		}
	}
	return nil
}

// eventAt returns event i (0-based) of the run in slot.
func (s *Store) eventAt(e *runRec, i int) (event, error) {
	ib := s.ar.bytes(e.idx)
	start := binary.LittleEndian.Uint32(ib[8*i:])
	end := e.log.n
	if i+1 < int(e.n) {
		end = binary.LittleEndian.Uint32(ib[8*(i+1):])
	}
	ev, rest, err := decodeEvent(s.ar.bytes(e.log)[start:end])
	if err == nil && len(rest) != 0 {
		err = errCorrupt
	}
	return ev, err
}

// wholeBefore returns the index of the last whole event at or before
// index i.
func (s *Store) wholeBefore(e *runRec, i int) int {
	return int(binary.LittleEndian.Uint32(s.ar.bytes(e.idx)[8*i+4:]))
}

// lastData returns the data of the latest event when it is whole, shared
// with the log (encoded bytes never change once written), or ok false.
func (s *Store) lastData(e *runRec) (data []byte, ok bool) {
	if e.n == 0 || e.dataLen < 0 {
		return nil, false
	}
	end := int(e.dataOff) + int(e.dataLen)
	return s.ar.bytes(e.log)[e.dataOff:end:end], true
}
