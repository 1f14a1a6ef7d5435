package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

// The client loop of the dynamic CLI: start a run, read its CLI object,
// resolve what the user typed, transition, and read the CLI again.
func Example() {
	// An ASMP server with the built-in workflows (any asmp serve will do).
	eng, _ := engine.New(memstore.New(), examples.All(), nil)
	ts := httptest.NewServer(server.New(eng, nil))
	defer ts.Close()

	ctx := context.Background()
	c, err := client.New(ts.URL, nil)
	if err != nil {
		panic(err)
	}
	run, err := c.StartRun(ctx, "config-wizard-v1", nil)
	if err != nil {
		panic(err)
	}
	for _, typed := range []string{"1", "dark mode", "y"} {
		cli, err := c.CLI(ctx, run.RunID)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s — %s\n", cli.Prompt, cli.Hint)
		for i, o := range cli.Options {
			fmt.Printf("  %d) %s [%s]\n", i+1, o.Label, o.Keys)
		}
		action, input, err := client.Resolve(cli, run.Frame, typed)
		if err != nil {
			panic(err)
		}
		fmt.Printf("> %s  => %s %v\n", typed, action, input)
		run, err = c.Transition(ctx, run.RunID, action, input, &client.TransitionOptions{IfMatch: run.ETag})
		if err != nil {
			panic(err)
		}
	}
	fmt.Println(run.State, run.Status, run.Data["value"])

	// Refusals carry the server's hint.
	_, err = c.Transition(ctx, run.RunID, "cancel", nil, nil)
	fmt.Println(client.IsForbidden(err), err)
	// Output:
	// Config wizard — Press 1 to start, or 2 to exit.
	//   1) Start wizard [1]
	//   2) Exit [2]
	// > 1  => start map[]
	// Set value — Enter your config value, then choose Save.
	//   1) Save [enter]
	// > dark mode  => save map[value:dark mode]
	// Apply configuration? — Confirm to apply or cancel.
	//   1) Yes, apply [y]
	//   2) No, cancel [n]
	// > y  => confirm map[]
	// DONE completed dark mode
	// true Action "cancel" is not available in state DONE: no actions are offered now.
}
