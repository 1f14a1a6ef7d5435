// Package agentstate remembers which server each run lives on, so that the
// agent commands (asmp step RUN …, asmp show RUN) need only the run id. The
// state is one small JSON file, runs.json, in the user's config directory
// (os.UserConfigDir()/asmp), or in $ASMP_STATE_DIR when set. It never holds
// tokens. Separate processes may update it at once: writes take a lock
// file and replace the file atomically.
package agentstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/asmp-dev/asmp/asmpd"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// FileName is the name of the state file in its directory.
const FileName = "runs.json"

// MaxRuns is how many runs the file remembers; the least recently used are
// forgotten first.
const MaxRuns = 1000

// Entry is what is remembered about one run.
type Entry struct {
	// Server is the base URL of the API the run was started on.
	Server string `json:"server"`
	// WorkflowID is the run's workflow, for display.
	WorkflowID string `json:"workflow_id,omitempty"`
	// Used is when the run was last started, stepped or shown.
	Used time.Time `json:"used"`
}

type file struct {
	Version int              `json:"version"`
	Runs    map[string]Entry `json:"runs"`
}

// Store is the state file of one directory.
type Store struct {
	dir string
	now func() time.Time
}

// Dir returns the state directory: $ASMP_STATE_DIR, else
// os.UserConfigDir()/asmp. getenv nil means os.Getenv.
func Dir(getenv func(string) string) (string, error) {
	dir, err := asmpd.StateDir(getenv)
	if err != nil {
		return "", fmt.Errorf("no directory for the run state: %w", err)
	}
	return dir, nil
}

// Open returns the store in dir; nothing is read or created until used.
func Open(dir string) *Store { return &Store{dir: dir, now: time.Now} }

// Path returns the state file's path.
func (s *Store) Path() string { return filepath.Join(s.dir, FileName) }

// Lookup returns what is remembered about runID.
func (s *Store) Lookup(runID string) (Entry, bool, error) {
	f, err := s.read()
	if err != nil {
		return Entry{}, false, err
	}
	e, ok := f.Runs[runID]
	return e, ok, nil
}

// Remember records (or refreshes) runID's entry. A zero e.Used means now.
func (s *Store) Remember(runID string, e Entry) error {
	if runID == "" || e.Server == "" {
		return errors.New("agentstate: a run id and a server are needed")
	}
	if e.Used.IsZero() {
		e.Used = s.now().UTC()
	}
	return s.update(func(f *file) {
		if old, ok := f.Runs[runID]; ok && e.WorkflowID == "" {
			e.WorkflowID = old.WorkflowID
		}
		f.Runs[runID] = e
		if len(f.Runs) > MaxRuns {
			ids := make([]string, 0, len(f.Runs))
			for id := range f.Runs {
				ids = append(ids, id)
			}
			sort.Slice(ids, func(i, j int) bool { return f.Runs[ids[i]].Used.After(f.Runs[ids[j]].Used) })
			for _, id := range ids[MaxRuns:] {
				delete(f.Runs, id)
			}
		}
	})
}

// Forget removes runID's entry.
func (s *Store) Forget(runID string) error {
	return s.update(func(f *file) { delete(f.Runs, runID) })
}

func (s *Store) read() (*file, error) {
	f := &file{Version: 1, Runs: map[string]Entry{}}
	b, err := os.ReadFile(s.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the run state: %w", err)
	}
	if len(b) == 0 {
		return f, nil
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("the run state %s is damaged (delete it to start afresh): %w", s.Path(), err)
	}
	if f.Runs == nil {
		f.Runs = map[string]Entry{}
	}
	return f, nil
}

func (s *Store) update(change func(*file)) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("creating the run state directory: %w", err)
	}
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	f, err := s.read()
	if err != nil {
		return err
	}
	change(f)
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the run state: %w", err)
	}
	tmp, err := os.CreateTemp(s.dir, FileName+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing the run state: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing the run state: %w", errors.Join(werr, cerr))
	}
	if err := os.Rename(tmp.Name(), s.Path()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing the run state: %w", err)
	}
	return nil
}

// lockWait bounds how long update waits for another process's lock, and
// staleLock is the age after which a lock is taken to be left by a crash.
const (
	lockWait  = 5 * time.Second
	staleLock = 10 * time.Second
)

func (s *Store) lock() (unlock func(), err error) {
	path := s.Path() + ".lock"
	deadline := time.Now().Add(lockWait)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("locking the run state: %w", err)
		}
		if st, serr := os.Stat(path); serr == nil && time.Since(st.ModTime()) > staleLock {
			os.Remove(path)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the run state is locked by another asmp process (%s); try again, or delete the lock file if none runs", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
