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

// NumberMax is the largest number number-facts-v1 accepts for a and b
// (the multiply row's schema bounds them the same way).
const NumberMax = 1000000

// ExecFlags are the serve flags number-facts-v1's rows need to run.
const ExecFlags = "--allow-exec --exec-allow factor --exec-allow expr"

// NumberFacts returns number-facts-v1, the example of workflow tools and
// tasks bound to directory rows: SUBMIT takes two whole numbers from 1 to
// NumberMax (declared as constraints, so others are refused with 400); in
// EXPLORE the factor tool runs the row FactorRow on any numbers; multiply
// enters MULTIPLYING, whose background task runs the row MultiplyRow with
// the run's a and b, stores the product in the run's data (product) and
// fires done (to DONE), or fires failed (to FAILED). FAILED offers a way
// out of every failure: retry (back to EXPLORE), change (back to SUBMIT,
// for other numbers) and cancel (to CANCELLED, which ends the run).
//
// The rows run only on a server started with
//
//	asmp serve --allow-exec --exec-allow factor --exec-allow expr
//
// Without that the tool answers a refused outcome and the task fails with
// the refusal's reason; both are recorded in the ledger, and the run can
// still be cancelled.
func NumberFacts() *workflow.Definition {
	one, maxN := 1.0, float64(NumberMax)
	bound := protocol.Constraint{Minimum: &one, Maximum: &maxN}
	b := workflow.New("number-facts-v1", "SUBMIT").
		Description("Factor numbers with a tool bound to a directory row, then multiply two numbers in a background task bound to another row (the server needs " + ExecFlags + ").")
	b.State("SUBMIT").
		Hint(fmt.Sprintf("Submit two whole numbers a and b, each from 1 to %d. The factor tool and the multiplication run programs: they work only on a server started with %s (without them the multiplication fails, and you can change the numbers or cancel).", NumberMax, ExecFlags)).
		Status(protocol.StatusAwaitingInput).
		CLI(workflow.CLIHook{Prompt: "Two numbers", InputHint: "a (integer), b (integer):",
			Hint:    fmt.Sprintf("Enter a and b, two whole numbers from 1 to %d. The multiplication succeeds only on a server started with %s.", NumberMax, ExecFlags),
			Options: []workflow.CLIOption{{Action: "submit", Label: "Submit", Keys: "enter"}}})
	b.State("EXPLORE").
		Hint(`Call the factor tool with {"numbers": [...]}, an array of whole numbers, as often as you like (it runs the directory row `+FactorRow+`), then multiply to compute a * b in the background.`).
		Milestone("Numbers submitted").
		RowTool("factor", "Print the prime factors of whole numbers (1 to 10^15) by running `factor` through the directory row "+FactorRow+".",
			map[string]string{"numbers": "array"}, FactorRow).
		CLI(workflow.CLIHook{Prompt: "Explore", Hint: "Multiply a by b in the background (agents and scripts may first factor numbers with the factor tool).",
			Options: []workflow.CLIOption{{Action: "multiply", Label: "Multiply a by b", Keys: "m"}}})
	b.State("MULTIPLYING").
		Hint("expr a * b runs as a background task through the directory row "+MultiplyRow+"; watch the stream: its progress lines name the invocation and its receipt.").
		RowTask(MultiplyRow, "done", "failed").TaskOutput("product").TaskReceipt("receipt")
	b.State("DONE").
		Hint("Multiplied: a * b = {data.product} (in the run's data as product). The ledger key of the multiplication is {data.receipt.key}, its receipt {data.receipt.inv_ID}: asmp history {data.receipt.key} shows it.").
		Milestone("Multiplied")
	b.State("FAILED").
		Hint("The multiplication did not succeed (the run's history and the failing event say why; a server without " + ExecFlags + " refuses it). retry runs it again from EXPLORE, change goes back to SUBMIT for other numbers, cancel ends the run.").
		CLI(workflow.CLIHook{Prompt: "Multiplication failed", Hint: "Try again, change the numbers, or cancel the run.",
			Options: []workflow.CLIOption{
				{Action: "retry", Label: "Try again", Keys: "r"},
				{Action: "change", Label: "Change the numbers", Keys: "e"},
				{Action: "cancel", Label: "Cancel the run", Keys: "c"},
			}})
	b.State("CANCELLED").Hint("The run was cancelled.")
	b.Transition("SUBMIT", "submit", "EXPLORE").ExpectWith("a", "integer", bound).ExpectWith("b", "integer", bound)
	b.Transition("EXPLORE", "multiply", "MULTIPLYING")
	b.Transition("MULTIPLYING", "done", "DONE")
	b.Transition("MULTIPLYING", "failed", "FAILED")
	b.Transition("FAILED", "retry", "EXPLORE")
	b.Transition("FAILED", "change", "SUBMIT")
	b.Transition("FAILED", "cancel", "CANCELLED")
	return b.MustBuild()
}
