package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

// versionedWorkflow returns the path's workflow id, checked against the
// scoping workflow of a /w/{workflow_id}/ API.
func versionedWorkflow(r *http.Request, c *call) (string, error) {
	wf := r.PathValue("wf")
	if c.wf != "" && wf != c.wf {
		return "", protocol.Errorf(protocol.ENotFound, "This API is scoped to workflow %q; use /workflows/%s/… under the root for workflow %q.", c.wf, wf, wf)
	}
	return wf, nil
}

// storedDefinition is the answer of GET /workflows/{id}/versions/{version}:
// the stored definition's canonical document (whose SHA-256 is the
// version) with what the server knows about it.
type storedDefinition struct {
	WorkflowID  string          `json:"workflow_id"`
	Version     string          `json:"version"`
	FirstServed time.Time       `json:"first_served"`
	LegacyRuns  int64           `json:"legacy_runs,omitempty"`
	Definition  json.RawMessage `json:"definition"`
}

func (s *Server) workflowVersion(w http.ResponseWriter, r *http.Request, c *call) error {
	wf, err := versionedWorkflow(r, c)
	if err != nil {
		return err
	}
	sd, err := s.e.StoredDefinition(r.Context(), wf, r.PathValue("version"))
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, storedDefinition{WorkflowID: sd.WorkflowID, Version: sd.Version,
		FirstServed: sd.FirstServed.UTC().Truncate(time.Millisecond), LegacyRuns: sd.LegacyRuns, Definition: sd.Body})
	return nil
}

// migrate serves POST /workflows/{id}/migrate {from, to, dry_run, states}.
func (s *Server) migrate(w http.ResponseWriter, r *http.Request, c *call) error {
	wf, err := versionedWorkflow(r, c)
	if err != nil {
		return err
	}
	body, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	var from, to string
	o := engine.MigrateOptions{Actor: c.actor.Name}
	for k, v := range body {
		switch k {
		case "from", "to":
			str, ok := v.(string)
			if !ok {
				return protocol.Errorf(protocol.EInvalid, "%s must be a version string (sha256:…).", k).With("field", k)
			}
			if k == "from" {
				from = str
			} else {
				to = str
			}
		case "dry_run":
			b, ok := v.(bool)
			if !ok && v != nil {
				return protocol.Errorf(protocol.EInvalid, "dry_run must be a boolean.").With("field", k)
			}
			o.DryRun = b
		case "states":
			m, ok := v.(map[string]any)
			if !ok {
				return protocol.Errorf(protocol.EInvalid, "states must be an object mapping states of from to states of to.").With("field", k)
			}
			o.States = map[string]string{}
			for old, nv := range m {
				ns, ok := nv.(string)
				if !ok {
					return protocol.Errorf(protocol.EInvalid, "states.%s must be a state name.", old).With("field", "states."+old)
				}
				o.States[old] = ns
			}
		default:
			return protocol.Errorf(protocol.EInvalid, "Unknown field %q: the body of POST /workflows/{id}/migrate takes from, to, dry_run and states.", k).With("field", k)
		}
	}
	rep, err := s.e.Migrate(r.Context(), wf, from, to, o)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, rep)
	return nil
}
