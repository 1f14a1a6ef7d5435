package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gowebpki/jcs"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/store/memstore"
)

// The browser's RFC 8785 canonical JSON is byte for byte the one the Go
// verifier hashes, on the values where implementations differ: number
// forms, string escapes, and key order by UTF-16 code units.
func TestBrowserCanonicalJSONMatchesGo(t *testing.T) {
	s := newServer(t, nil)
	tb := newTab(t, "jcs")
	tb.do(chromedp.Navigate(s.url + "/console/#/workflows"))
	tb.waitJS(`!!document.querySelector('.workflow-list')`)
	docs := []string{
		`{"b":1,"a":[true,false,null],"A":{"z":"","y":[]}}`,
		`[1e21, 1e-7, 0.1, 100, -0, 123456789012345680000, 5e-324, 1.7976931348623157e308, 33.333333333333336]`,
		`{"s":"é\u2028\u0000\t\"\\/ <script>", "emoji":"😀", "\u20ac":1, "\ud83d\ude00":2, "\ufb33":3, "1":4, "10":5, "":6}`,
		`{"nested":{"k":[{"b":2,"a":1},"x"]},"num":-1.5e-10}`,
	}
	for _, doc := range docs {
		want, err := jcs.Transform([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](
			`import('/console/js/verify.js').then((m) => m.canonicalJSON(JSON.parse(`+strconv.Quote(doc)+`)))`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("canonical JSON of %s:\nbrowser %s\nGo      %s", doc, got, want)
		}
	}
}

// Every receipt of a ledger of 7 records verifies in the browser (proofs
// of every shape: left and right children, a border part), and a proof of
// the wrong length, or another leaf's path, does not.
func TestBrowserVerifiesEveryProofShape(t *testing.T) {
	s := newServer(t, nil)
	var invs []string
	for i := range 7 {
		rc, err := s.ledger.Dispatch(context.Background(), "row-"+strconv.Itoa(i%3), []byte(rowBody("Version "+strconv.Itoa(i))))
		if err != nil {
			t.Fatal(err)
		}
		invs = append(invs, rc.InvID)
	}
	tb := newTab(t, "proofs")
	tb.do(chromedp.Navigate(s.url + "/console/#/ledger"))
	tb.waitJS(`document.querySelectorAll('table.records tbody tr').length === 7`)
	ids, _ := json.Marshal(invs)
	js := `(async () => {
	  const m = await import('/console/js/verify.js');
	  const key = (await (await fetch('/api/ledger/key', {headers: {Accept: 'application/json'}})).json()).public_key;
	  const out = [];
	  for (const inv of ` + string(ids) + `) {
	    const rec = await (await fetch('/api/dispatch?receipt=' + inv)).json();
	    const proof = await (await fetch('/api/ledger/proof?inv_ID=' + inv)).json();
	    out.push((await m.verifyReceipt(rec, proof, key)).ok ? 'ok' : 'bad');
	    const short = {...proof, proof: proof.proof.slice(1)};
	    out.push((await m.verifyReceipt(rec, short, key)).ok ? 'ok' : 'bad');
	    // Another leaf's path, its ids blanked so that only the hashing up the tree can tell.
	    const next = ` + string(ids) + `[(proof.leaf_index + 1) % 7];
	    const other = await (await fetch('/api/ledger/proof?inv_ID=' + next)).json();
	    const alien = {...other, inv_ID: '', entry_hash: '', leaf_hash: '', leaf_index: proof.leaf_index};
	    out.push((await m.verifyReceipt(rec, alien, key)).ok ? 'ok' : 'bad');
	  }
	  return out.join(',');
	})()`
	got, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(strings.Repeat("ok,bad,bad,", 7), ",")
	if got != want {
		t.Fatalf("verdicts %s, want %s", got, want)
	}
}

// A background task's progress shows as a bar while it runs, and the
// run's CLI key (a: Approve) fires the action.
func TestTaskProgressAndKeyboard(t *testing.T) {
	s := newServerOn(t, memstore.New(), examples.AllWith(examples.Options{PaymentStep: 150 * time.Millisecond}), nil)
	id := s.start(t, "expense-approval-v1")
	if _, err := s.eng.Transition(context.Background(), id, "submit", map[string]any{"amount": 25.0, "description": "Taxi"}, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, "progress")
	tb.do(chromedp.Navigate(s.url + "/console/#/runs/" + id))
	tb.waitJS(`document.querySelector('#run-state')?.textContent === 'REVIEW' && !!document.querySelector('button[data-action="approve"]') && document.querySelector('.live')?.textContent.includes('Live')`)
	tb.do(chromedp.KeyEvent("a"))
	tb.waitJS(`document.querySelector('#task-progress')?.value > 0`)
	tb.shot("run-progress")
	tb.waitJS(`document.querySelector('#run-state')?.textContent === 'PAID' && document.querySelector('.progress-hint').textContent.includes('Paid')`)
}

// A checkpoint whose Ed25519 signature is well formed (the pinned key's
// name and key hash, 64 bytes) but wrong in one byte is not verified: the
// signature step fails, although the proof leads to the root the
// checkpoint names. The test double changes only the signature.
func TestBrowserRefusesWrongCheckpointSignature(t *testing.T) {
	s := newServer(t, nil)
	var inv string
	for i := range 3 {
		rc, err := s.ledger.Dispatch(context.Background(), "row-"+strconv.Itoa(i), []byte(rowBody("Version "+strconv.Itoa(i))))
		if err != nil {
			t.Fatal(err)
		}
		inv = rc.InvID
	}
	var forged atomic.Int32
	ps := rewritingProxy(t, s.url, "/api/ledger/proof", func(b []byte) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("proof: %v", err)
			return b
		}
		note, _ := m["checkpoint"].(string)
		m["checkpoint"] = wrongSignatures(t, note)
		forged.Add(1)
		out, err := json.Marshal(m)
		if err != nil {
			t.Error(err)
		}
		return out
	})
	tb := newTab(t, "forged-signature")
	// Pin the server's key first, from the server itself.
	tb.do(chromedp.Navigate(s.url + "/console/#/ledger/" + inv))
	tb.waitJS(`document.querySelector('#verdict')?.classList.contains('ok')`)
	// The same origin through the double: the pinned key stays.
	tb.do(chromedp.Navigate(ps + "/console/#/ledger/" + inv))
	tb.waitJS(`document.querySelector('#verdict')?.classList.contains('bad')`)
	if forged.Load() == 0 {
		t.Fatal("the double changed no proof")
	}
	if got := tb.text("#verdict"); !strings.Contains(got, "Not verified") {
		t.Fatalf("verdict %q", got)
	}
	if got := tb.text("#pinned-key"); got != s.ledger.VerifierKey() {
		t.Fatalf("checked against %q, want the server's key %q", got, s.ledger.VerifierKey())
	}
	if got := tb.text(".steps li.bad"); !strings.Contains(got, "signed by the pinned key") || !strings.Contains(got, "invalid") {
		t.Fatalf("failed step %q, want the signature step", got)
	}
	if n := tb.eval(`String(document.querySelectorAll('.steps li.bad').length) + '/' + document.querySelectorAll('.steps li.ok').length`); n != "1/2" {
		t.Fatalf("steps failed/passed: %s, want only the signature step failed", n)
	}
	tb.shot("receipt-wrong-signature")
}

// wrongSignatures changes one byte of the Ed25519 signature (past the
// 4-byte key hash) of every signature line of a signed note.
func wrongSignatures(t *testing.T, note string) string {
	t.Helper()
	i := strings.LastIndex(note, "\n\n")
	if i < 0 {
		t.Errorf("not a signed note: %q", note)
		return note
	}
	out := note[:i+2]
	for _, line := range strings.Split(strings.TrimSuffix(note[i+2:], "\n"), "\n") {
		name, b64, ok := strings.Cut(strings.TrimPrefix(line, "— "), " ")
		sig, err := base64.StdEncoding.DecodeString(b64)
		if !ok || err != nil || len(sig) != 4+64 {
			t.Errorf("signature line %q", line)
			return note
		}
		sig[4+17] ^= 0x20
		out += "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
	}
	return out
}
