package memstore

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"time"
)

// eventLog is a run's events. The latest is kept decoded (the run's current
// value derives from it on every read); the earlier ones are encoded back
// to back in one byte slice. A long-lived server's heap is mostly event
// logs, and byte slices hold no pointers: the garbage collector never
// scans them, so its cost no longer grows with the number of stored
// events, and an encoded event is smaller than its decoded form.
type eventLog struct {
	old  []byte   // events 1 … n-1, encoded (encodeEvent)
	offs []uint32 // where each of them starts in old
	last event    // event n
	n    int      // events in the log
	// wholes are the indexes of the events kept whole (see store.Event),
	// in order; patchBytes counts the patch bytes kept since the last.
	wholes     []uint32
	patchBytes int64
	// the time of event 1 (the run's creation), as in event
	firstUnix int64
	firstFull *time.Time
}

// maxLog bounds one run's encoded events (offsets are 32-bit).
const maxLog = math.MaxUint32

var errLogFull = errors.New("the run's event log exceeds 4 GiB in memory")

func (l *eventLog) len() int { return l.n }

// append adds ev as the latest event.
func (l *eventLog) append(ev event) error {
	if l.n > 0 {
		if len(l.old) >= maxLog {
			return errLogFull
		}
		l.offs = append(l.offs, uint32(len(l.old)))
		l.old = appendEvent(l.old, &l.last)
	}
	if l.n == 0 {
		l.firstUnix, l.firstFull = ev.unix, ev.full
		ev.whole = true
	}
	if ev.whole {
		l.wholes = append(l.wholes, uint32(l.n))
		l.patchBytes = 0
	} else {
		l.patchBytes += int64(len(ev.patch))
	}
	l.last = ev
	l.n++
	return nil
}

// at returns event i (0-based).
func (l *eventLog) at(i int) (event, error) {
	if i == l.n-1 {
		return l.last, nil
	}
	end := len(l.old)
	if i+1 < len(l.offs) {
		end = int(l.offs[i+1])
	}
	ev, rest, err := decodeEvent(l.old[l.offs[i]:end])
	if err == nil && len(rest) != 0 {
		err = errCorrupt
	}
	return ev, err
}

// wholeBefore returns the index of the last whole event at or before
// index i.
func (l *eventLog) wholeBefore(i int) int {
	k, found := slices.BinarySearch(l.wholes, uint32(i))
	if found {
		return i
	}
	return int(l.wholes[k-1]) // wholes[0] is 0 <= i
}

// firstTime is the time of event 0 (the run's creation).
func (l *eventLog) firstTime() time.Time {
	return (&event{unix: l.firstUnix, full: l.firstFull}).time()
}

var errCorrupt = errors.New("memstore: corrupt encoded event")

// appendEvent encodes e: its time (a flag, then Unix nanoseconds, or the
// time.MarshalBinary form and the zone's name: a time that is not UTC comes
// back in a fixed zone of the same name and offset), its strings and data length-prefixed, and
// its milestones as count+1 (0 for nil) and length-prefixed strings.
func appendEvent(b []byte, e *event) []byte {
	if e.full == nil {
		b = append(b, 0)
		b = binary.AppendVarint(b, e.unix)
	} else {
		t, _ := e.full.MarshalBinary() // fails only for offsets not in whole minutes
		name, _ := e.full.Zone()
		if e.full.Location() == time.UTC {
			name = ""
		}
		b = append(b, 1)
		b = appendBytes(b, t)
		b = appendString(b, name)
	}
	for _, s := range [...]string{e.kind, e.action, e.from, e.to, e.actor, e.snap.State, e.snap.Status, e.snap.Error, e.wfv, e.reason} {
		b = appendString(b, s)
	}
	switch {
	case !e.whole:
		b = append(b, 2)
		b = appendBytes(b, e.patch)
		b = appendStrings(b, e.added)
	case e.snap.Data == nil:
		b = append(b, 0)
		b = appendStrings(b, e.snap.Milestones)
	default:
		b = append(b, 1)
		b = appendBytes(b, e.snap.Data)
		b = appendStrings(b, e.snap.Milestones)
	}
	return appendStrings(b, e.offered)
}

// appendStrings encodes ss as count+1 (0 for nil) and length-prefixed strings.
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(ss))+1)
	for _, m := range ss {
		b = appendString(b, m)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// decodeEvent decodes one event from the front of b and returns the rest.
func decodeEvent(b []byte) (event, []byte, error) {
	var e event
	d := decoder{b: b}
	switch d.byte() {
	case 0:
		e.unix = d.varint()
	case 1:
		var t time.Time
		if err := t.UnmarshalBinary(d.bytes()); err != nil {
			return event{}, nil, errCorrupt
		}
		if name := d.string(); name != "" {
			_, off := t.Zone()
			t = t.In(time.FixedZone(name, off))
		}
		e.full = &t
	default:
		return event{}, nil, errCorrupt
	}
	for _, p := range [...]*string{&e.kind, &e.action, &e.from, &e.to, &e.actor, &e.snap.State, &e.snap.Status, &e.snap.Error, &e.wfv, &e.reason} {
		*p = d.string()
	}
	e.whole = true
	switch d.byte() {
	case 0:
		e.snap.Milestones = d.strings()
	case 1:
		e.snap.Data = append([]byte{}, d.bytes()...)
		e.snap.Milestones = d.strings()
	case 2:
		e.whole = false
		e.patch = append([]byte{}, d.bytes()...)
		e.added = d.strings()
	default:
		d.err = true
	}
	e.offered = d.strings()
	if d.err {
		return event{}, nil, errCorrupt
	}
	return e, d.b, nil
}

// decoder reads the encoding of appendEvent; any overrun sets err.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.err = true
		return 0xff
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) string() string { return string(d.bytes()) }

// strings decodes appendStrings.
func (d *decoder) strings() []string {
	n := d.uvarint()
	if n == 0 || d.err {
		return nil
	}
	if n-1 > uint64(len(d.b)) { // each string takes at least one byte
		d.err = true
		return nil
	}
	ss := make([]string, n-1)
	for i := range ss {
		ss[i] = d.string()
	}
	return ss
}
