package examples_test

import (
	"testing"

	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/oip/row"
)

func TestRowsAndNumberFacts(t *testing.T) {
	t.Parallel()
	rows, err := examples.Rows()
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]*row.Row{}
	for _, r := range rows {
		d, err := row.Decode(r.Body)
		if err != nil {
			t.Fatalf("%s: %v", r.Key, err)
		}
		byKey[r.Key] = d
	}
	if len(byKey) != 2 || byKey[examples.FactorRow] == nil || byKey[examples.MultiplyRow] == nil {
		t.Fatalf("rows: %v", byKey)
	}
	cmd, err := command.Build(byKey[examples.MultiplyRow], map[string]any{"a": int64(6), "b": int64(7)})
	if err != nil || cmd.Line != "expr 6 '*' 7" {
		t.Fatalf("multiply: %+v %v", cmd, err)
	}
	if _, err := command.Build(byKey[examples.MultiplyRow], map[string]any{"a": int64(6), "op": "+", "b": int64(7)}); err == nil {
		t.Fatal("the schema allows another operator than *")
	}
	cmd, err = command.Build(byKey[examples.FactorRow], map[string]any{"numbers": []any{int64(360), int64(17)}})
	if err != nil || cmd.Line != "factor 360 17" {
		t.Fatalf("factor: %+v %v", cmd, err)
	}

	d := examples.NumberFacts()
	var tool, task string
	for _, s := range d.States {
		for _, tl := range s.Tools {
			tool = tl.Row
		}
		if s.Task != nil {
			task = s.Task.Row
		}
	}
	if tool != examples.FactorRow || task != examples.MultiplyRow || len(d.Warnings) != 0 {
		t.Fatalf("tool %q task %q warnings %v", tool, task, d.Warnings)
	}
}
