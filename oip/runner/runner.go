package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/oip/execution"
	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/protocol"
)

// Defaults for Options fields left zero.
const (
	// DefaultTimeout is how long a command may run when its row gives no
	// timeout.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxTimeout caps every timeout, the row's included.
	DefaultMaxTimeout = 5 * time.Minute
	// DefaultMaxOutput is how many bytes of stdout and of stderr are kept.
	DefaultMaxOutput = 64 << 10
	// DefaultPath is the PATH commands run with and row command words are
	// looked up on.
	DefaultPath = "/usr/local/bin:/usr/bin:/bin"
	// Shell is the shell that runs shell rows.
	Shell = "/bin/sh"
)

// DefaultConcurrency is how many executions run at once when
// Options.Concurrency is 0: the number of CPUs, at least 2.
var DefaultConcurrency = max(2, runtime.NumCPU())

// readerGrace bounds the wait for output that a process outside the
// killed process group still holds open.
const readerGrace = 2 * time.Second

// errTimeout is the cancellation cause of a command's own deadline.
var errTimeout = errors.New("timeout")

// Options configure an Executor.
type Options struct {
	// Allow lists the programs that may run: bare names, looked up on
	// LookupPath by New, or absolute paths. Every entry must exist. An
	// empty list allows nothing (every execution is refused).
	Allow []string
	// LookupPath is the PATH bare names in Allow are looked up on; ""
	// means the server's own PATH at the time New runs.
	LookupPath string
	// Path is the PATH of every command's environment, and the one a
	// row's bare command word is looked up on; "" means DefaultPath.
	Path string
	// DefaultTimeout applies to rows without a timeout (0 means
	// DefaultTimeout).
	DefaultTimeout time.Duration
	// MaxTimeout caps every timeout (0 means DefaultMaxTimeout).
	MaxTimeout time.Duration
	// MaxOutput is how many bytes of stdout and of stderr are kept in the
	// outcome (0 means DefaultMaxOutput). Full sizes and hashes are always
	// recorded.
	MaxOutput int64
	// Concurrency bounds the executions running at once (0 means
	// DefaultConcurrency).
	Concurrency int
	// Dir is the directory under which each execution gets a fresh
	// working directory; it is created (0700) when missing, and refused
	// when it is a symbolic link, owned by another user or writable by
	// group or others. "" means DefaultDir(). Working directories that
	// executions which died with their server left in it are removed by
	// New.
	Dir string
	// Logger receives one line per execution (program, outcome, duration;
	// never the arguments or the environment); nil discards.
	Logger *slog.Logger
}

// Program is an executable file as the allowlist knows it.
type Program struct {
	// Name is the program as it was named: a bare name or a path.
	Name string `json:"name"`
	// Path is the absolute path Name resolved to on a PATH (or Name
	// itself when it was absolute).
	Path string `json:"path"`
	// Real is Path with every symlink resolved: the file that runs.
	Real string `json:"real"`
}

// Executor runs OIP invocations under the rules of the package doc. It
// implements execution.Executor and is safe for concurrent use.
type Executor struct {
	allow      []Program
	path       string
	defTimeout time.Duration
	maxTimeout time.Duration
	maxOutput  int64
	dir        string
	dirFile    *os.File // dir, opened once checked (see openDir)
	slots      chan struct{}
	log        *slog.Logger
}

var _ execution.Executor = (*Executor)(nil)

// New returns an Executor. It resolves every allowlist entry now (an entry
// that is relative, missing or not an executable file is an error) and
// creates the working-directory parent.
func New(opts Options) (*Executor, error) {
	e := &Executor{
		path:       opts.Path,
		defTimeout: opts.DefaultTimeout,
		maxTimeout: opts.MaxTimeout,
		maxOutput:  opts.MaxOutput,
		dir:        opts.Dir,
		log:        opts.Logger,
	}
	if e.path == "" {
		e.path = DefaultPath
	}
	if e.defTimeout <= 0 {
		e.defTimeout = DefaultTimeout
	}
	if e.maxTimeout <= 0 {
		e.maxTimeout = DefaultMaxTimeout
	}
	if e.maxOutput <= 0 {
		e.maxOutput = DefaultMaxOutput
	}
	n := opts.Concurrency
	if n <= 0 {
		n = DefaultConcurrency
	}
	e.slots = make(chan struct{}, n)
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.dir == "" {
		e.dir = DefaultDir()
	}
	dir, err := filepath.Abs(e.dir)
	if err != nil {
		return nil, fmt.Errorf("exec: working directory parent %q: %w", e.dir, err)
	}
	if e.dirFile, err = openDir(dir); err != nil {
		return nil, fmt.Errorf("exec: the working directory parent: %w", err)
	}
	e.dir = dir
	if n := e.sweep(); n > 0 {
		e.log.Info("removed the working directories of executions that died with their server", "dir", dir, "removed", n)
	}
	lookup := opts.LookupPath
	if lookup == "" {
		lookup = os.Getenv("PATH")
	}
	for _, name := range opts.Allow {
		p, err := Resolve(name, lookup)
		if err != nil {
			return nil, fmt.Errorf("exec: allowlist entry %q: %w", name, err)
		}
		if !e.permits(p) { // the same program under another spelling
			e.allow = append(e.allow, p)
		}
	}
	return e, nil
}

// Allowed returns the resolved allowlist.
func (e *Executor) Allowed() []Program { return slices.Clone(e.allow) }

// Dir returns the directory the working directories are created in.
func (e *Executor) Dir() string { return e.dir }

// Resolve finds the program name: an absolute path is taken as it is, a
// bare name is looked up on the PATH list path (whose relative entries are
// skipped), and a relative path with a slash is refused. The result must
// be an executable regular file; Real is its path with symlinks resolved.
func Resolve(name, path string) (Program, error) {
	p := Program{Name: name}
	switch {
	case name == "":
		return p, errors.New("empty program name")
	case strings.ContainsRune(name, 0):
		return p, errors.New("program name holds a NUL byte")
	case strings.Contains(name, "/"):
		if !filepath.IsAbs(name) {
			return p, errors.New("a relative path is not allowed: give a bare name or an absolute path")
		}
		p.Path = filepath.Clean(name)
		if err := executable(p.Path); err != nil {
			return p, err
		}
	default:
		for _, dir := range filepath.SplitList(path) {
			if dir == "" || !filepath.IsAbs(dir) {
				continue
			}
			if c := filepath.Join(dir, name); executable(c) == nil {
				p.Path = c
				break
			}
		}
		if p.Path == "" {
			return p, fmt.Errorf("not found on PATH %s", path)
		}
	}
	real, err := filepath.EvalSymlinks(p.Path)
	if err != nil {
		return p, fmt.Errorf("resolve symlinks: %w", err)
	}
	if p.Real, err = filepath.Abs(real); err != nil {
		return p, fmt.Errorf("resolve symlinks: %w", err)
	}
	return p, nil
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// permits reports whether p is on the allowlist: the same file (after
// symlinks) called by the same name.
func (e *Executor) permits(p Program) bool {
	for _, a := range e.allow {
		if a.Real == p.Real && filepath.Base(a.Path) == filepath.Base(p.Path) {
			return true
		}
	}
	return false
}

// Timeout returns the timeout of a row: its own, else the default, capped
// by the maximum.
func (e *Executor) Timeout(r *row.Row) time.Duration {
	t := e.defTimeout
	if r != nil {
		if rt := r.TimeoutDuration(); rt > 0 {
			t = rt
		}
	}
	return min(t, e.maxTimeout)
}

// plan is what to run: the file and its argv.
type plan struct {
	path string
	argv []string
	prog string // for logs: the program the row names
}

func refused(format string, args ...any) *execution.Outcome {
	return &execution.Outcome{Class: execution.OutcomeRefused, Reason: fmt.Sprintf(format, args...)}
}

// check applies the allowlist to x and returns the plan, or the refusal.
func (e *Executor) check(x execution.Execution) (plan, *execution.Outcome) {
	if !supported {
		return plan{}, refused("Execution needs process groups, which this server's system (%s) lacks. Nothing ran.", runtime.GOOS)
	}
	if x.Row == nil || x.Command == nil || len(x.Command.Argv) == 0 {
		return plan{}, refused("The invocation carries no command to run.")
	}
	argv := x.Command.Argv
	method := x.Command.Method
	if method == "" {
		method = x.Row.Method()
	}
	if method != row.MethodExec && method != row.MethodShell {
		return plan{}, refused("Unknown invocation_method %q; use exec or shell.", method)
	}
	word := argv[0]
	prog, err := Resolve(word, e.path)
	if err != nil {
		return plan{}, refused("The program %q cannot be run: %s. Nothing ran.", word, err)
	}
	if !e.permits(prog) {
		return plan{}, refused("The program %q (%s) is not on this server's allowlist; the operator allows it with --exec-allow %s. Nothing ran.", word, prog.Real, word)
	}
	if method == row.MethodExec {
		return plan{path: prog.Real, argv: slices.Clone(argv), prog: prog.Path}, nil
	}
	sh, err := Resolve(Shell, "")
	if err != nil {
		return plan{}, refused("This row runs under %s, which cannot be run here: %s. Nothing ran.", Shell, err)
	}
	if !e.permits(sh) {
		return plan{}, refused("This row's invocation_method is shell: it needs %s on the allowlist as well as %q (--exec-allow sh). Nothing ran.", Shell, word)
	}
	script := x.Command.Shell
	if script == "" {
		script = command.Render(argv)
	}
	return plan{path: sh.Real, argv: []string{"sh", "-c", script}, prog: prog.Path}, nil
}

// Execute runs x and returns its outcome. It never panics and never
// returns without an outcome: see the package doc for the classes.
func (e *Executor) Execute(ctx context.Context, x execution.Execution) (out execution.Outcome) {
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("executor panicked", "attempt", x.AttemptID, "panic", v)
			out = execution.Outcome{Class: execution.OutcomeFailed, Reason: "The executor failed internally; the server log has the details."}
		}
	}()
	p, refusal := e.check(x)
	if refusal != nil {
		e.log.Info("execution refused", "attempt", x.AttemptID, "key", x.Key, "row", x.RowKey, "source", x.Principal.Name, "reason", refusal.Reason)
		return *refusal
	}
	timeout := e.Timeout(x.Row)
	if !e.acquire(ctx, timeout) {
		return *refused("Every execution slot (%d) stayed busy for %s; nothing ran. Try again later.", cap(e.slots), timeout)
	}
	defer func() { <-e.slots }()
	out = e.run(ctx, p, timeout, x.Row.Format())
	code := -2
	if out.ExitCode != nil {
		code = *out.ExitCode
	}
	e.log.Info("executed", "attempt", x.AttemptID, "key", x.Key, "row", x.RowKey, "source", x.Principal.Name,
		"program", p.prog, "class", out.Class, "exit_code", code, "duration_ms", out.DurationMS)
	return out
}

// acquire takes an execution slot, waiting at most wait and while ctx
// lives.
func (e *Executor) acquire(ctx context.Context, wait time.Duration) bool {
	select {
	case e.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case e.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	}
}

func failed(start time.Time, format string, args ...any) execution.Outcome {
	return execution.Outcome{Class: execution.OutcomeFailed, DurationMS: time.Since(start).Milliseconds(), Reason: fmt.Sprintf(format, args...)}
}

// run starts p in a fresh working directory and process group, waits for
// it (killing the group at the deadline) and captures its output.
func (e *Executor) run(ctx context.Context, p plan, timeout time.Duration, format string) execution.Outcome {
	begin := time.Now()
	dir, err := e.mkRunDir()
	if err != nil {
		e.log.Error("creating a working directory failed", "err", err)
		return failed(begin, "Could not create a working directory; the server log has the details.")
	}
	defer e.removeAll(dir)
	outR, outW, err := os.Pipe()
	if err != nil {
		return failed(begin, "Could not create a pipe: %v.", err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return failed(begin, "Could not create a pipe: %v.", err)
	}
	defer errR.Close()
	stdout, stderr := newCapture(e.maxOutput), newCapture(e.maxOutput)
	var readers sync.WaitGroup
	readers.Go(func() { _, _ = io.Copy(stdout, outR) })
	readers.Go(func() { _, _ = io.Copy(stderr, errR) })

	cmd := &exec.Cmd{
		Path:   p.path,
		Args:   p.argv,
		Env:    []string{"PATH=" + e.path, "LANG=C.UTF-8", "HOME=" + dir},
		Dir:    dir,
		Stdin:  nil, // /dev/null
		Stdout: outW,
		Stderr: errW,
		// Its own process group, killed as a whole (and, on Linux, killed
		// when the server dies).
		SysProcAttr: sysProcAttr(),
	}
	closeOnExec()
	guard := startGuard() // kills the group should the server die (its grandchildren too)
	defer guard.stop()
	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		readers.Wait()
		return failed(start, "The command could not be started: %v.", err)
	}
	pid := cmd.Process.Pid
	guard.arm(pid)
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()
	exited, killerDone := make(chan struct{}), make(chan struct{})
	var stopped error
	go func() {
		defer close(killerDone)
		select {
		case <-tctx.Done():
			stopped = context.Cause(tctx)
			killGroup(pid)
		case <-exited:
		}
	}()
	// Whatever the command leaves running in its group dies with it: on
	// Linux before the leader is reaped, so the group id cannot have been
	// reused by then.
	waited := waitExit(pid)
	elapsed := time.Since(start)
	if waited {
		killGroup(pid)
	}
	werr := cmd.Wait()
	if !waited {
		elapsed = time.Since(start)
		killGroup(pid)
	}
	close(exited)
	<-killerDone
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(readerGrace):
		// A process outside the group still holds the pipes open.
		outR.Close()
		errR.Close()
		<-done
	}

	out := execution.Outcome{DurationMS: elapsed.Milliseconds(), Stdout: stdout.stream(), Stderr: stderr.stream()}
	ps := cmd.ProcessState
	if ps == nil {
		out.Class, out.Reason = execution.OutcomeFailed, fmt.Sprintf("Waiting for the command failed: %v.", werr)
		return out
	}
	code := ps.ExitCode()
	out.ExitCode = &code
	ws, _ := ps.Sys().(syscall.WaitStatus)
	switch {
	case errors.Is(stopped, errTimeout):
		out.Class, out.Reason = execution.OutcomeFailed, fmt.Sprintf("Timed out after %s: the command and its process group were killed.", timeout)
	case stopped != nil:
		out.Class, out.Reason = execution.OutcomeFailed, fmt.Sprintf("Stopped before it finished (%v): the command and its process group were killed.", stopped)
	case ws.Signaled():
		out.Class, out.Reason = execution.OutcomeFailed, fmt.Sprintf("Killed by signal %d (%s).", int(ws.Signal()), ws.Signal())
	case code != 0:
		out.Class, out.Reason = execution.OutcomeFailed, fmt.Sprintf("Exited with code %d.", code)
	default:
		out.Class = execution.OutcomeSucceeded
	}
	if format == row.FormatJSON {
		parseOutput(&out, stdout)
	}
	return out
}

// parseOutput sets out.Output from the stdout of a json row; output that
// cannot be parsed fails an otherwise successful outcome.
func parseOutput(out *execution.Outcome, stdout *capture) {
	fail := func(reason string) {
		if out.Class == execution.OutcomeSucceeded {
			out.Class, out.Reason = execution.OutcomeFailed, reason
		}
	}
	if stdout.truncated() {
		fail(fmt.Sprintf("The row's output_format is json, but stdout (%d bytes) is over the output cap (%d bytes), so it was not parsed.", stdout.size, stdout.max))
		return
	}
	if _, err := protocol.DecodeValue(stdout.buf, 0); err != nil {
		fail("The row's output_format is json, but stdout is not one JSON value: " + strings.TrimPrefix(protocol.ErrorHint(err), "The body "))
		return
	}
	var b bytes.Buffer
	if err := json.Compact(&b, stdout.buf); err != nil {
		fail("The row's output_format is json, but stdout is not one JSON value.")
		return
	}
	out.Output = json.RawMessage(b.Bytes())
}

// removeAll removes a working directory, making read-only directories
// writable first if the command left any.
func (e *Executor) removeAll(dir string) {
	if err := os.RemoveAll(dir); err == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		e.log.Warn("removing a working directory failed", "dir", dir, "err", err)
	}
}
