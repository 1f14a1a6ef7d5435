package memstore

import (
	"encoding/binary"
	"errors"
	"time"
)

var errLogFull = errors.New("the run's event log exceeds 4 GiB in memory")

var errCorrupt = errors.New("memstore: corrupt encoded event")

// appendEvent encodes e: its time (a flag, then Unix nanoseconds, or the
// time.MarshalBinary form and the zone's name: a time that is not UTC comes
// back in a fixed zone of the same name and offset), its strings and data length-prefixed, and
// its milestones as count+1 (0 for nil) and length-prefixed strings.
func appendEvent(b []byte, e *event) []byte {
	b = appendTime(b, e.unix, e.full)
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

// appendTime encodes a time as event keeps it: a flag, then Unix
// nanoseconds, or the time.MarshalBinary form and the zone's name.
func appendTime(b []byte, unix int64, full *time.Time) []byte {
	if full == nil {
		b = append(b, 0)
		return binary.AppendVarint(b, unix)
	}
	t, _ := full.MarshalBinary() // fails only for offsets not in whole minutes
	name, _ := full.Zone()
	if full.Location() == time.UTC {
		name = ""
	}
	b = append(b, 1)
	b = appendBytes(b, t)
	return appendString(b, name)
}

// time decodes appendTime.
func (d *decoder) time() (unix int64, full *time.Time) {
	switch d.byte() {
	case 0:
		return d.varint(), nil
	case 1:
		var t time.Time
		if err := t.UnmarshalBinary(d.bytes()); err != nil {
			d.err = true
			return 0, nil
		}
		if name := d.string(); name != "" {
			_, off := t.Zone()
			t = t.In(time.FixedZone(name, off))
		}
		return 0, &t
	}
	d.err = true
	return 0, nil
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
	e, rest, err := decodeEventShared(b)
	if err == nil {
		if e.snap.Data != nil {
			e.snap.Data = append([]byte{}, e.snap.Data...)
		}
		if e.patch != nil {
			e.patch = append([]byte{}, e.patch...)
		}
	}
	return e, rest, err
}

// decodeEventShared is decodeEvent with the data and patch sharing b.
func decodeEventShared(b []byte) (event, []byte, error) {
	var e event
	d := decoder{b: b}
	e.unix, e.full = d.time()
	if d.err {
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
		e.snap.Data = d.bytes()
		e.snap.Milestones = d.strings()
	case 2:
		e.whole = false
		e.patch = d.bytes()
		if e.patch == nil && !d.err {
			e.patch = []byte{}
		}
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
