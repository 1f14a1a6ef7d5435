package examples

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/workflow"
)

// The directory rows number-facts-v1 is bound to.
const (
	// FactorRow runs `factor NUMBERS...` (text output); the factor tool
	// invokes it.
	FactorRow = "number-facts.factor"
	// MultiplyRow runs `expr A '*' B` (JSON output: the product); the
	// MULTIPLYING state's background task invokes it.
	MultiplyRow = "number-facts.multiply"
)

//go:embed rows/*.json
var rowFiles embed.FS

// Row is a directory row as a dispatch request: {"key": K, "body": {...}},
// the shape `asmp dispatch FILE` sends.
type Row struct {
	Key  string          `json:"key"`
	Body json.RawMessage `json:"body"`
}

// Rows returns the directory rows of the built-in examples (the files in
// examples/rows), ordered by key. `asmp serve` dispatches them at start-up
// when it serves the built-in examples, unless the ledger already holds
// them unchanged.
func Rows() ([]Row, error) {
	names, err := fs.Glob(rowFiles, "rows/*.json")
	if err != nil {
		return nil, fmt.Errorf("examples: list rows: %w", err)
	}
	rows := make([]Row, 0, len(names))
	for _, n := range names {
		b, err := rowFiles.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("examples: read %s: %w", n, err)
		}
		var r Row
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("examples: decode %s: %w", n, err)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
	return rows, nil
}

// NumberFacts returns number-facts-v1, the example of workflow tools and
// tasks bound to directory rows: SUBMIT takes two whole numbers; in
// EXPLORE the factor tool runs the row FactorRow on any numbers; multiply
// enters MULTIPLYING, whose background task runs the row MultiplyRow with
// the run's a and b, stores the product in the run's data (product) and
// fires done (to DONE), or fires failed (to FAILED, from which retry goes
// back to EXPLORE).
//
// The rows run only on a server started with
//
//	asmp serve --allow-exec --exec-allow factor --exec-allow expr
//
// Without that the tool answers a refused outcome and the task fails with
// the refusal's reason; both are recorded in the ledger.
func NumberFacts() *workflow.Definition {
	b := workflow.New("number-facts-v1", "SUBMIT").
		Description("Factor numbers with a tool bound to a directory row, then multiply two numbers in a background task bound to another row (the server needs --allow-exec --exec-allow factor --exec-allow expr).")
	b.State("SUBMIT").
		Hint("Submit two whole numbers a and b, each from 1 to 1000000.").
		Status(protocol.StatusAwaitingInput).
		CLI(workflow.CLIHook{Prompt: "Two numbers", InputHint: "a (integer), b (integer):",
			Options: []workflow.CLIOption{{Action: "submit", Label: "Submit", Keys: "enter"}}})
	b.State("EXPLORE").
		Hint(`Call the factor tool with {"numbers": [360, 17]} as often as you like (it runs the directory row `+FactorRow+`), then multiply to compute a * b in the background.`).
		Milestone("Numbers submitted").
		RowTool("factor", "Print the prime factors of whole numbers (1 to 10^15) by running `factor` through the directory row "+FactorRow+".",
			map[string]string{"numbers": "array"}, FactorRow).
		CLI(workflow.CLIHook{Prompt: "Explore",
			Options: []workflow.CLIOption{{Action: "multiply", Label: "Multiply a by b", Keys: "m"}}})
	b.State("MULTIPLYING").
		Hint("expr a * b runs as a background task through the directory row "+MultiplyRow+"; watch the stream: its progress lines name the invocation and its receipt.").
		RowTask(MultiplyRow, "done", "failed").TaskOutput("product")
	b.State("DONE").
		Hint("Multiplied: the product is in the run's data (product). Its receipt is the task's invocation_result in the ledger, under the key task:RUN_ID.VERSION:ATTEMPT that the progress lines named.").
		Milestone("Multiplied")
	b.State("FAILED").
		Hint("The multiplication did not succeed; the task's last progress line and its invocation in the ledger say why (a server without --allow-exec --exec-allow expr refuses it). retry goes back to EXPLORE.").
		CLI(workflow.CLIHook{Prompt: "Multiplication failed",
			Options: []workflow.CLIOption{{Action: "retry", Label: "Back to explore", Keys: "r"}}})
	b.Transition("SUBMIT", "submit", "EXPLORE").Expect("a", "integer").Expect("b", "integer")
	b.Transition("EXPLORE", "multiply", "MULTIPLYING")
	b.Transition("MULTIPLYING", "done", "DONE")
	b.Transition("MULTIPLYING", "failed", "FAILED")
	b.Transition("FAILED", "retry", "EXPLORE")
	return b.MustBuild()
}
