package embedded_test

import (
	"context"
	"fmt"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/client/embedded"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/store/memstore"
)

// A built-in workflow driven in-process, with no server.
func ExampleNew() {
	eng, _ := engine.New(memstore.New(), examples.All(), nil)
	var b client.Backend = embedded.New(eng)
	ctx := context.Background()
	run, _ := b.StartRun(ctx, "", nil)
	run, _ = b.Transition(ctx, run.RunID, "start", nil, nil)
	run, _ = b.Transition(ctx, run.RunID, "save", map[string]any{"value": "v"}, nil)
	fmt.Println(run.State, run.ETag, run.Actions())
	// Output: CONFIRM "3" [confirm cancel]
}
