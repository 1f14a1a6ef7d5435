package agentstate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/asmp-dev/asmp/internal/app/agentstate"
)

func TestRememberLookupForget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested")
	s := agentstate.Open(dir)
	if _, ok, err := s.Lookup("r1"); ok || err != nil {
		t.Fatalf("empty lookup: %v %v", ok, err)
	}
	if err := s.Remember("r1", agentstate.Entry{Server: "http://a", WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Remember("r1", agentstate.Entry{Server: "http://b"}); err != nil {
		t.Fatal(err)
	}
	e, ok, err := s.Lookup("r1")
	if !ok || err != nil || e.Server != "http://b" || e.WorkflowID != "wf" || e.Used.IsZero() {
		t.Fatalf("lookup = %+v %v %v", e, ok, err)
	}
	if st, _ := os.Stat(s.Path()); st.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v", st.Mode())
	}
	if err := s.Forget("r1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Lookup("r1"); ok {
		t.Fatal("not forgotten")
	}
	if err := s.Remember("", agentstate.Entry{Server: "x"}); err == nil {
		t.Fatal("empty run id accepted")
	}
	os.WriteFile(s.Path(), []byte("{"), 0o600)
	if _, _, err := s.Lookup("r1"); err == nil {
		t.Fatal("damaged file read")
	}
}

// Separate processes (here goroutines with their own Store) never lose an
// entry.
func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := agentstate.Open(dir).Remember(fmt.Sprintf("run-%d", i), agentstate.Entry{Server: "http://s"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	s := agentstate.Open(dir)
	for i := 0; i < 20; i++ {
		if _, ok, _ := s.Lookup(fmt.Sprintf("run-%d", i)); !ok {
			t.Fatalf("run-%d lost", i)
		}
	}
}

func TestDir(t *testing.T) {
	d, err := agentstate.Dir(func(k string) string {
		if k == "ASMP_STATE_DIR" {
			return "/x/y"
		}
		return ""
	})
	if err != nil || d != "/x/y" {
		t.Fatalf("Dir = %q %v", d, err)
	}
}
