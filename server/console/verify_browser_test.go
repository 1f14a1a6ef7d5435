package console_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gowebpki/jcs"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
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
	saved := examples.PaymentStep
	examples.PaymentStep = 150 * time.Millisecond
	t.Cleanup(func() { examples.PaymentStep = saved })
	s := newServer(t, nil)
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
