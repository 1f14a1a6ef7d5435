package tui

import (
	"context"
	"iter"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// quiet is a backend whose stream says nothing (the test drives the model
// by hand); other calls are not made.
type quiet struct{ client.Backend }

func (quiet) Stream(ctx context.Context, runID string, o *client.StreamOptions) iter.Seq2[client.StreamItem, error] {
	return func(func(client.StreamItem, error) bool) {}
}

func keyMsg(s string) tea.KeyMsg {
	if s == "enter" {
		return tea.KeyMsg{Type: tea.KeyEnter}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

// settleOf returns the settleMsg a command batch carries (running only the
// commands that answer at once: settle's).
func settleOf(t *testing.T, cmd tea.Cmd) settleMsg {
	t.Helper()
	if cmd == nil {
		t.Fatal("no command: nothing settles")
	}
	switch msg := cmd().(type) {
	case settleMsg:
		return msg
	case tea.BatchMsg:
		for _, c := range msg {
			if c == nil {
				continue
			}
			if s, ok := c().(settleMsg); ok {
				return s
			}
		}
	}
	t.Fatal("the command does not settle")
	return settleMsg{}
}

// Keys processed after a critical question (or a new screen) is shown but
// before it settled were typed ahead: they are discarded, so a y typed
// with the Enter that asked the question does not answer it.
func TestTypeaheadNeverAnswersACriticalQuestion(t *testing.T) {
	m := NewModel(t.Context(), Options{Backend: quiet{}})
	f := &client.RunFrame{Frame: protocol.Frame{RunID: "r", State: "REVIEW", Status: "active", NextStates: []protocol.NextState{
		{Action: "approve"}, {Action: "reject", Expects: map[string]string{"reason": "string"}, IsCritical: true}}}, ETag: `"2"`}
	cli := protocol.CLI{Options: []protocol.CLIOption{{Action: "approve", Label: "Approve", Keys: "a"}, {Action: "reject", Label: "Reject", Keys: "r"}}}
	m.Update(settleOf(t, m.applyFrame(f, &cli, "")))
	m.Update(keyMsg("r"))
	for _, r := range "too much" {
		m.Update(keyMsg(string(r)))
	}
	_, cmd := m.Update(keyMsg("enter"))
	if m.mode != modeConfirm {
		t.Fatalf("mode %v, want the critical question", m.mode)
	}
	settled := settleOf(t, cmd)
	m.Update(keyMsg("y")) // queued before the question settled
	if m.mode != modeConfirm || m.ask == nil {
		t.Fatalf("a typed-ahead y answered the question (mode %v)", m.mode)
	}
	m.Update(settled)
	m.Update(keyMsg("y"))
	if m.mode != modeBusy {
		t.Fatalf("a y after the question did not send it (mode %v)", m.mode)
	}
}
