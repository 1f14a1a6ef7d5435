package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

// A frame's offered actions as tool definitions for a model (or an MCP
// host), and the model's tool calls fired with Call.
func ExampleClient_Call() {
	eng, _ := engine.New(memstore.New(), examples.All(), nil)
	ts := httptest.NewServer(server.New(eng, nil))
	defer ts.Close()
	ctx := context.Background()
	c, _ := client.New(ts.URL, nil)
	run, _ := c.StartRun(ctx, "config-wizard-v1", nil)
	frame := run.Frame

	// What a model would answer, one tool call per step.
	calls := []struct{ name, arguments string }{
		{"start", `{}`},
		{"save", `{"value": 42}`}, // a number for a string: refused
		{"save", `{"value": "dark mode"}`},
		{"confirm", `{}`},
	}
	for _, call := range calls {
		tools, _ := client.Tools(frame)
		for _, t := range tools {
			params, _ := json.Marshal(t.Parameters)
			fmt.Printf("  tool %s %s\n", t.Name, params)
		}
		res, err := c.Call(ctx, frame, call.name, json.RawMessage(call.arguments))
		if err != nil {
			fmt.Printf("%s %s => refused: %v\n", call.name, call.arguments, err)
			continue
		}
		frame = res.Frame.Frame
		fmt.Printf("%s %s => %s\n", call.name, call.arguments, frame.State)
	}
	// Output:
	//   tool start {"additionalProperties":false,"properties":{},"required":[],"type":"object"}
	//   tool exit {"additionalProperties":false,"properties":{},"required":[],"type":"object"}
	// start {} => CONFIGURE
	//   tool save {"additionalProperties":false,"properties":{"value":{"type":"string"}},"required":["value"],"type":"object"}
	// save {"value": 42} => refused: Field "value" must be a string, got integer.
	//   tool save {"additionalProperties":false,"properties":{"value":{"type":"string"}},"required":["value"],"type":"object"}
	// save {"value": "dark mode"} => CONFIRM
	//   tool confirm {"additionalProperties":false,"properties":{},"required":[],"type":"object"}
	//   tool cancel {"additionalProperties":false,"properties":{},"required":[],"type":"object"}
	// confirm {} => DONE
}
