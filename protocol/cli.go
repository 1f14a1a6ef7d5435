package protocol

// CLI is the dynamic CLI object served at GET /runs/{run_id}/cli. It is not
// part of the State Frame.
type CLI struct {
	Prompt    string      `json:"prompt,omitempty"`
	Hint      string      `json:"hint,omitempty"`
	Options   []CLIOption `json:"options,omitempty"`
	InputHint string      `json:"input_hint,omitempty"`
	RunID     string      `json:"run_id,omitempty"`
}

// CLIOption is one selectable option of a CLI object.
type CLIOption struct {
	Action string `json:"action"`
	Label  string `json:"label"`
	Keys   string `json:"keys,omitempty"`
}

// DefaultPrompt is the CLI prompt used when a state's hook sets none.
const DefaultPrompt = "Choose an action"
