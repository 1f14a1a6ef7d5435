package protocol

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// The hand-written encoders must give exactly json.Marshal's bytes.

var nastyStrings = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\nret\rbs\bff\f",
	"\x00\x01\x1f\x7f", "é ü 日本 🎉", "\u2028\u2029", "bad \xff utf8 \xc3", "…—", "a/b?c=d&e",
}

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return nastyStrings[r.IntN(len(nastyStrings))]
	}
	var sb strings.Builder
	for range r.IntN(12) {
		switch r.IntN(6) {
		case 0:
			sb.WriteByte(byte(r.IntN(0x80)))
		case 1:
			sb.WriteByte(byte(0x80 + r.IntN(0x80)))
		case 2:
			sb.WriteRune(rune(r.IntN(0x3000)))
		default:
			sb.WriteByte("abcXYZ019 .-_/"[r.IntN(14)])
		}
	}
	return sb.String()
}

func randValue(r *rand.Rand, depth int) any {
	switch r.IntN(12) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return int64(r.Uint64())
	case 3:
		return []float64{0, math.Copysign(0, -1), 1, 1.5, 1e-7, 1e-6, 1e21, 1e20, 123456789.125, -3.25e-9, math.MaxFloat64, math.SmallestNonzeroFloat64}[r.IntN(12)]
	case 4:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25))
	case 5:
		if depth > 0 {
			a := make([]any, r.IntN(4))
			for i := range a {
				a[i] = randValue(r, depth-1)
			}
			return a
		}
	case 6:
		if depth > 0 {
			return randObject(r, depth-1)
		}
	case 7:
		return r.IntN(100)
	case 8:
		return []string{"x", "<y>"}
	}
	return randString(r)
}

func randObject(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range r.IntN(5) {
		m[randString(r)] = randValue(r, depth)
	}
	return m
}

func randStrings(r *rand.Rand) []string {
	switch r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	s := make([]string, 1+r.IntN(3))
	for i := range s {
		s[i] = randString(r)
	}
	return s
}

func randExpects(r *rand.Rand) map[string]string {
	switch r.IntN(3) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	m := map[string]string{}
	for range 1 + r.IntN(3) {
		m[randString(r)] = randString(r)
	}
	return m
}

func randFrame(r *rand.Rand) Frame {
	f := Frame{RunID: randString(r), WorkflowID: randString(r), ResourceURL: randString(r), State: randString(r),
		Status: randString(r), Hint: randString(r), Milestones: randStrings(r), StreamURL: randString(r)}
	if r.IntN(2) == 0 {
		f.ActiveSkill = &ActiveSkill{Name: randString(r), URL: randString(r), ContextSummary: randString(r), Version: randString(r)}
	}
	if r.IntN(4) != 0 {
		f.NextStates = []NextState{}
		for range r.IntN(4) {
			f.NextStates = append(f.NextStates, NextState{Action: randString(r), Method: randString(r), Href: randString(r), Expects: randExpects(r), IsCritical: r.IntN(2) == 0})
		}
	}
	switch r.IntN(3) {
	case 1:
		f.Data = map[string]any{}
	case 2:
		f.Data = randObject(r, 3)
	}
	if r.IntN(2) == 0 {
		f.Tools = []Tool{}
		for range r.IntN(3) {
			f.Tools = append(f.Tools, Tool{Name: randString(r), Href: randString(r), Description: randString(r), Expects: randExpects(r)})
		}
	}
	if r.IntN(2) == 0 {
		f.Resources = []Resource{}
		for range r.IntN(3) {
			f.Resources = append(f.Resources, Resource{URI: randString(r), Name: randString(r), MimeType: randString(r)})
		}
	}
	if r.IntN(3) != 0 {
		f.Links = map[string]Link{}
		for range r.IntN(4) {
			l := Link{Href: randString(r), Method: randString(r), Version: randString(r), DueAt: randString(r)}
			if r.IntN(2) == 0 {
				l.Version = "" // a timer link: href, method and due_at
			}
			f.Links[randString(r)] = l
		}
	}
	return f
}

func TestAppendJSONMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		f := randFrame(r)
		want, werr := json.Marshal(f)
		got, gerr := f.AppendJSON(nil)
		if (werr == nil) != (gerr == nil) || string(got) != string(want) {
			t.Fatalf("frame %d:\n got %s (%v)\nwant %s (%v)", i, got, gerr, want, werr)
		}
		// A stream line is the frame's properties with "id" first (the
		// reference: encoding/json on the frame, id spliced in).
		sf := StreamFrame{ID: r.Int64N(1 << 40), Frame: f}
		if werr == nil {
			want = append([]byte(`{"id":`+strconv.FormatInt(sf.ID, 10)+","), want[1:]...)
		}
		got, gerr = sf.AppendJSON([]byte("prefix"))
		if (werr == nil) != (gerr == nil) || (werr == nil && string(got) != "prefix"+string(want)) {
			t.Fatalf("stream frame %d:\n got %s (%v)\nwant %s (%v)", i, got, gerr, want, werr)
		}
		if werr == nil {
			if m, err := json.Marshal(sf); err != nil || string(m) != string(want) {
				t.Fatalf("StreamFrame.MarshalJSON %d:\n got %s (%v)\nwant %s", i, m, err, want)
			}
		}
		c := CLI{Prompt: randString(r), Hint: randString(r), InputHint: randString(r), RunID: randString(r)}
		for range r.IntN(3) {
			c.Options = append(c.Options, CLIOption{Action: randString(r), Label: randString(r), Keys: randString(r)})
		}
		if r.IntN(4) == 0 {
			c = CLI{}
		}
		want, _ = json.Marshal(c)
		got, _ = c.AppendJSON(nil)
		if string(got) != string(want) {
			t.Fatalf("cli %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// Negative zero keeps its sign, as encoding/json writes it: -0 (a constant
// -0.0 would be +0 in Go, hence math.Copysign).
func TestAppendJSONNegativeZero(t *testing.T) {
	negZero := math.Copysign(0, -1)
	f := Frame{NextStates: []NextState{}, Data: map[string]any{"z": negZero, "p": 0.0, "a": []any{negZero}}}
	want, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(want), `"data":{"a":[-0],"p":0,"z":-0}`) {
		t.Fatalf("encoding/json wrote %s; the reference changed", want)
	}
	got, err := f.AppendJSON(nil)
	if err != nil || string(got) != string(want) {
		t.Fatalf("AppendJSON = %s (%v), want %s", got, err, want)
	}
}

func TestAppendJSONUnsupportedValue(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(-1), func() {}} {
		f := Frame{NextStates: []NextState{}, Data: map[string]any{"x": v}}
		if _, err := json.Marshal(f); err == nil {
			t.Fatalf("json.Marshal accepted %v", v)
		}
		if _, err := f.AppendJSON(nil); err == nil {
			t.Fatalf("AppendJSON accepted %v", v)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range nastyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}
