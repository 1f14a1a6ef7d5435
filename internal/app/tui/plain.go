package tui

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// RunPlain drives the run with a line-oriented loop, for dumb terminals,
// pipes and scripts: it prints the CLI object (prompt, hint, numbered
// options with their keys, input hint), reads one line, resolves it with
// client.Resolve, fires the action, and repeats until the run completes or
// fails, or the input ends. While the run is processing it prints the
// stream's progress until the run waits for input again. "?" prints what
// can be typed; "q", "quit" or "exit" leave (when no option is named so).
func RunPlain(ctx context.Context, o Options) (Result, error) {
	if o.Backend == nil {
		return Result{}, errors.New("tui: no backend")
	}
	in, out := o.In, o.Out
	if in == nil {
		in = os.Stdin
	}
	if out == nil {
		out = os.Stdout
	}
	p := &plain{ctx: ctx, o: o, b: o.Backend, out: out, lines: bufio.NewScanner(in), g: glyphSet(o.ASCII)}
	p.lines.Buffer(make([]byte, 0, 4096), 1<<20)
	err := p.run()
	return p.result(), err
}

type plain struct {
	ctx   context.Context
	o     Options
	b     client.Backend
	out   io.Writer
	lines *bufio.Scanner
	g     glyphs
	frame *client.RunFrame
	cli   protocol.CLI
}

func (p *plain) result() Result {
	if p.frame == nil {
		return Result{RunID: p.o.RunID}
	}
	return Result{RunID: p.frame.RunID, State: p.frame.State, Status: p.frame.Status, Hint: p.frame.Hint}
}

func (p *plain) printf(format string, args ...any) { fmt.Fprintf(p.out, format, args...) }

func (p *plain) run() error {
	var err error
	if p.o.RunID == "" {
		p.frame, err = p.b.StartRun(p.ctx, p.o.WorkflowID, p.o.Data)
	} else {
		p.frame, err = p.b.Frame(p.ctx, p.o.RunID)
	}
	if err != nil {
		return err
	}
	if p.o.OnRun != nil {
		p.o.OnRun(p.frame)
	}
	p.printf("Run %s (%s%s)\n", p.frame.RunID, p.frame.WorkflowID, workflowVersion(&p.frame.Frame, ", workflow version "))
	for {
		if protocol.Terminal(p.frame.Status) {
			p.printDone()
			return nil
		}
		if p.frame.Status == protocol.StatusProcessing {
			if err := p.wait(); err != nil {
				return err
			}
			if p.frame.Status == protocol.StatusProcessing || protocol.Terminal(p.frame.Status) {
				continue
			}
		}
		cli, err := p.b.CLI(p.ctx, p.frame.RunID)
		if err != nil {
			return err
		}
		p.cli = cli
		p.printCLI()
		line, ok := p.readLine()
		if !ok {
			p.printf("\nInput ended; run %s stays at %s. Attach again with --run %s.\n", p.frame.RunID, p.frame.State, p.frame.RunID)
			return nil
		}
		if err := p.step(line); err != nil {
			if errors.Is(err, errQuit) {
				return nil
			}
			return err
		}
	}
}

// step resolves one line and fires it; refusals are printed, not returned.
func (p *plain) step(line string) error {
	t := strings.TrimSpace(line)
	if t == "?" || t == "help" {
		p.printf("%s\n", client.Help(p.cli, p.frame.Frame))
		return nil
	}
	switch strings.ToLower(t) {
	case "q", "quit", "exit", ":q":
		if !names(p.cli, t) {
			p.printf("Leaving; run %s stays at %s.\n", p.frame.RunID, p.frame.State)
			return errQuit
		}
	}
	action, input, err := client.Resolve(p.cli, p.frame.Frame, line)
	if err != nil {
		p.printf("%s %s\n", p.g.cross, client.HintOf(err))
		return nil
	}
	if ns, ok := p.frame.Action(action); ok && ns.IsCritical && !p.o.Yes {
		p.printf("%s is marked critical. Send it? Type y to confirm: ", action)
		answer, ok := p.readAnswer()
		if a := strings.ToLower(strings.TrimSpace(answer)); !ok || (a != "y" && a != "yes") {
			p.printf("Not sent: %s.\n", action)
			return nil
		}
	}
	next, err := p.b.Transition(p.ctx, p.frame.RunID, action, input, &client.TransitionOptions{IfMatch: p.frame.ETag})
	if err != nil {
		if p.ctx.Err() != nil {
			return err
		}
		p.printf("%s %s\n", p.g.cross, client.HintOf(err))
		// Show the run as it is now, whatever happened.
		f, ferr := p.b.Frame(p.ctx, p.frame.RunID)
		if ferr != nil {
			return ferr
		}
		p.frame = f
		return nil
	}
	p.printf("%s %s %s %s\n", p.g.check, action, p.g.arrow, next.State)
	p.frame = next
	return nil
}

// names reports whether t names an option of cli by action, keys or label,
// so that a workflow's own "exit" action wins over leaving.
func names(cli protocol.CLI, t string) bool {
	for _, o := range cli.Options {
		if strings.EqualFold(o.Action, t) || normKey(o.Keys) == normKey(t) || strings.EqualFold(o.Label, t) {
			return true
		}
	}
	return false
}

// errQuit ends the loop without an error.
var errQuit = errors.New("quit")

func (p *plain) readLine() (string, bool) {
	p.printf("> ")
	return p.readAnswer()
}

// readAnswer reads one line without printing a prompt.
func (p *plain) readAnswer() (string, bool) {
	if !p.lines.Scan() {
		return "", false
	}
	return p.lines.Text(), true
}

func (p *plain) printCLI() {
	f := p.frame
	p.printf("\n%s %s [%s] %s\n", p.g.rule, f.State, f.Status, p.g.rule)
	if p.cli.Prompt != "" {
		p.printf("%s\n", p.cli.Prompt)
	}
	if p.cli.Hint != "" {
		p.printf("%s\n", p.cli.Hint)
	}
	for i, o := range p.cli.Options {
		p.printf("  %d) %s", i+1, o.Label)
		if o.Keys != "" {
			p.printf(" [%s]", o.Keys)
		}
		if ns, ok := f.Action(o.Action); ok {
			if len(ns.Expects) > 0 {
				p.printf(" (%s)", protocol.DescribeExpects(ns.Expects))
			}
			if ns.IsCritical {
				p.printf(" critical")
			}
		}
		p.printf("\n")
	}
	if len(p.cli.Options) == 0 {
		p.printf("  (no action is offered now; press enter to look again)\n")
	}
	for _, t := range timerLines(&f.Frame, p.o.now()) {
		p.printf("%s\n", t)
	}
	if p.cli.InputHint != "" {
		p.printf("%s\n", p.cli.InputHint)
	}
}

// wait follows the stream while the run is processing.
func (p *plain) wait() error {
	p.printf("\n%s %s [processing] %s %s\n", p.g.rule, p.frame.State, p.g.rule, p.frame.Hint)
	for it, err := range p.b.Stream(p.ctx, p.frame.RunID, &client.StreamOptions{LastEventID: p.frame.Version()}) {
		if err != nil {
			return err
		}
		switch {
		case it.Progress != nil:
			p.printf("  %s %s\n", it.Progress.Progress, it.Progress.Hint)
		case it.Frame != nil:
			p.frame = p.frame.Streamed(it.Frame)
			if it.Frame.Status != protocol.StatusProcessing {
				p.printf("%s %s [%s]\n", p.g.arrow, it.Frame.State, it.Frame.Status)
				return nil
			}
		}
	}
	return nil
}

func (p *plain) printDone() {
	f := p.frame
	mark := p.g.check
	if f.Status == protocol.StatusFailed {
		mark = p.g.cross
	}
	p.printf("\n%s Run %s in state %s", mark, f.Status, f.State)
	if f.Hint != "" {
		p.printf(": %s", f.Hint)
	}
	p.printf("\n")
	if len(f.Milestones) > 0 {
		p.printf("Milestones: %s\n", strings.Join(f.Milestones, " "+p.g.arrow+" "))
	}
	p.printf("Run id: %s\n", f.RunID)
}
