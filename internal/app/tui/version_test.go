package tui_test

import (
	"testing"

	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/app/tui"
)

// The screen names the workflow version the run is pinned to (short form).
func TestScreenShowsTheWorkflowVersion(t *testing.T) {
	short := examples.ConfigWizard().Version()[:len("sha256:")+12]
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			tm := start(t, tui.Options{Backend: b, WorkflowID: "config-wizard-v1"})
			screen(t, tm, "ASMP config-wizard-v1 * INITIAL", "workflow "+short)
			tm.Type("q")
		})
	}
}
