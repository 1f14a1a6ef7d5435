package workflow_test

import (
	"os"
	"testing"

	"github.com/asmp-dev/asmp/workflow"
)

// FuzzLoad feeds arbitrary bytes to the workflow file loader: it must
// return a definition or an error, never panic, and a definition it returns
// must be internally consistent.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"testdata/config-wizard.yaml", "testdata/broken.yaml", "testdata/alias-bomb.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"workflow_id":"a-b","initial_state":"A","states":{"A":{}},"transitions":[]}`))
	f.Add([]byte("workflow_id: a\nstates: !!binary xx\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := workflow.Load("fuzz.yaml", src, nil)
		if err != nil {
			return
		}
		if _, ok := d.State(d.InitialState); !ok {
			t.Fatalf("loaded definition's initial state %q is undeclared", d.InitialState)
		}
		for _, tr := range d.Transitions {
			if _, ok := d.State(tr.To); !ok {
				t.Fatalf("transition to undeclared %q", tr.To)
			}
		}
		_ = d.Mermaid(d.InitialState)
		_ = d.DOT("")
	})
}
