package engine_test

import (
	"testing"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/store/memstore"
)

// The engine hands out a transition's constraints for tool schemas, and a
// transition without them has none.
func TestConstraintsForSchemas(t *testing.T) {
	e, err := engine.New(memstore.New(), append(examples.All(), examples.NumberFacts()), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := e.Constraints("number-facts-v1", "SUBMIT", "submit")
	if a := c["a"]; a.Minimum == nil || *a.Minimum != 1 || a.Maximum == nil || *a.Maximum != 1000000 || c["b"].Maximum == nil {
		t.Fatalf("submit constraints = %+v", c)
	}
	if c := e.Constraints("config-wizard-v1", "CONFIGURE", "save"); c != nil {
		t.Fatalf("save has constraints %+v", c)
	}
	if e.Constraints("nope-v1", "A", "b") != nil || e.ToolConstraints("number-facts-v1", "EXPLORE", "factor") != nil || e.ToolConstraints("number-facts-v1", "NOPE", "factor") != nil {
		t.Fatal("constraints for what has none")
	}
}
