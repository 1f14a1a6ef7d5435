package protocol

// Status values of a State Frame.
const (
	StatusActive        = "active"
	StatusProcessing    = "processing"
	StatusAwaitingInput = "awaiting_input"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
)

// ValidStatus reports whether s is one of the five statuses the schema allows.
func ValidStatus(s string) bool {
	switch s {
	case StatusActive, StatusProcessing, StatusAwaitingInput, StatusCompleted, StatusFailed:
		return true
	}
	return false
}

// Terminal reports whether a status ends a run (completed or failed).
func Terminal(status string) bool {
	return status == StatusCompleted || status == StatusFailed
}

// Frame is a State Frame: where a run is, what to do there, and the only
// valid next actions. It is the body of every run response.
type Frame struct {
	RunID       string          `json:"run_id"`
	WorkflowID  string          `json:"workflow_id"`
	ResourceURL string          `json:"resource_url,omitempty"`
	State       string          `json:"state"`
	Status      string          `json:"status"`
	Hint        string          `json:"hint"`
	ActiveSkill *ActiveSkill    `json:"active_skill,omitempty"`
	NextStates  []NextState     `json:"next_states"`
	Data        map[string]any  `json:"data,omitempty"`
	Milestones  []string        `json:"milestones,omitempty"`
	StreamURL   string          `json:"stream_url,omitempty"`
	Tools       []Tool          `json:"tools,omitempty"`
	Resources   []Resource      `json:"resources,omitempty"`
	Links       map[string]Link `json:"_links,omitempty"`
}

// NextState is one transition offered by a frame. Clients POST its href.
type NextState struct {
	Action     string            `json:"action"`
	Method     string            `json:"method"`
	Href       string            `json:"href"`
	Expects    map[string]string `json:"expects,omitempty"`
	IsCritical bool              `json:"is_critical,omitempty"`
}

// Tool is a stage-bound tool callable in the frame's state.
type Tool struct {
	Name        string            `json:"name"`
	Href        string            `json:"href"`
	Description string            `json:"description,omitempty"`
	Expects     map[string]string `json:"expects,omitempty"`
}

// Resource is a stage-bound resource readable in the frame's state.
type Resource struct {
	URI      string `json:"uri"`
	Name     string `json:"name,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
}

// ActiveSkill points the agent at a SKILL.md to load into its context.
type ActiveSkill struct {
	Name           string `json:"name"`
	URL            string `json:"url"`
	ContextSummary string `json:"context_summary,omitempty"`
	Version        string `json:"version,omitempty"`
}

// Link is one HATEOAS link of a frame's _links map.
type Link struct {
	Href   string `json:"href,omitempty"`
	Method string `json:"method,omitempty"`
	// Version is set on the workflow_version link: the version
	// ("sha256:…") of the definition the run is pinned to.
	Version string `json:"version,omitempty"`
	// DueAt is set on a "timer:ACTION" link, which names a pending timer
	// of the run's state: when it fires ACTION (RFC 3339, UTC). The link's
	// href is that transition's.
	DueAt string `json:"due_at,omitempty"`
}

// Action returns the offered next state named action, if any.
func (f *Frame) Action(action string) (NextState, bool) {
	for _, n := range f.NextStates {
		if n.Action == action {
			return n, true
		}
	}
	return NextState{}, false
}

// Actions lists the offered actions in order.
func (f *Frame) Actions() []string {
	out := make([]string, len(f.NextStates))
	for i, n := range f.NextStates {
		out[i] = n.Action
	}
	return out
}

// StreamFrame is one frame line of an NDJSON stream: a frame plus the run's
// event sequence number, the one property allowed beyond the schema there.
type StreamFrame struct {
	ID int64 `json:"id"`
	Frame
}

// MarshalJSON writes the frame's properties with "id" first.
func (s StreamFrame) MarshalJSON() ([]byte, error) {
	return s.AppendJSON(make([]byte, 0, 1024))
}

// Progress is a stream envelope reported by a running background task.
type Progress struct {
	ID       int64  `json:"id"`
	Progress string `json:"progress"`
	Hint     string `json:"hint,omitempty"`
}

// Heartbeat is the stream line sent at a fixed interval on an idle stream so
// that proxies keep the connection open. ID is the last event id sent.
type Heartbeat struct {
	ID        int64 `json:"id"`
	Heartbeat bool  `json:"heartbeat"`
}
