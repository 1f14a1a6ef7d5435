package webhook_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/webhook"
)

// recipe returns the shell block of docs/WEBHOOKS.md that follows the
// marker "<!-- recipe: name -->".
func recipe(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "WEBHOOKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- recipe: "+name+" -->\n```sh\n")
	if !ok {
		t.Fatalf("docs/WEBHOOKS.md has no recipe %q", name)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("recipe %q does not end", name)
	}
	return block
}

// needTools skips the test when a tool the recipes use is missing, except
// in CI (CI=true), where scripts/test installs them and a missing one fails.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range append([]string{"bash", "base64", "od"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed (scripts/test installs it)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// sh runs a script in dir with bash, failing on any error.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s\nscript:\n%s", err, out, script)
	}
	return string(out)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// The openssl recipes of docs/WEBHOOKS.md work as written: the published
// vector verifies, so does what webhook.Sign produces (both signatures of a
// rotation), a changed body does not, and a request signed by the curl
// recipe passes client.VerifyWebhook.
func TestDocRecipes(t *testing.T) {
	needTools(t, "openssl")
	verify := recipe(t, "verify")

	t.Run("published vector", func(t *testing.T) {
		out := sh(t, t.TempDir(), recipe(t, "values")+verify)
		if !strings.Contains(out, "signature ok") || !strings.Contains(out, "stale timestamp") {
			t.Fatalf("the recipe printed %q", out)
		}
	})

	old, fresh := newSecret(t), newSecret(t)
	secrets := []webhook.Secret{fresh, {Key: old.Key, ExpiresAt: time.Now().Add(time.Hour)}}
	body := []byte(`{"type":"run.completed","timestamp":"2026-12-02T16:00:00Z","data":{"run_id":"r1","workflow_id":"w","state":"DONE","status":"completed","actor":"o'brien","frame_href":"/runs/r1"}}`)
	h, err := webhook.Sign(secrets, "msg_recipe", time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		secret webhook.Secret
		body   []byte
		ok     bool
	}{
		{"the new secret", fresh, body, true},
		{"the old secret", old, body, true},
		{"a changed body", fresh, append(body[:len(body):len(body)], ' '), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "body.json"), c.body, 0o600); err != nil {
				t.Fatal(err)
			}
			vars := "secret=" + shellQuote(c.secret.Encode()) + "\nid=" + shellQuote(h.Get("webhook-id")) +
				"\nts=" + shellQuote(h.Get("webhook-timestamp")) + "\nsigs=" + shellQuote(h.Get("webhook-signature")) + "\n"
			out := sh(t, dir, vars+verify)
			if strings.Contains(out, "stale") || strings.Contains(out, "signature ok") != c.ok {
				t.Fatalf("the recipe printed %q, want ok=%v", out, c.ok)
			}
		})
	}

	t.Run("curl", func(t *testing.T) {
		needTools(t, "curl")
		got := make(chan error, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got <- client.VerifyWebhook(fresh.Encode(), r.Header, b, 0)
			w.WriteHeader(http.StatusNoContent)
		}))
		defer srv.Close()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "body.json"), body, 0o600); err != nil {
			t.Fatal(err)
		}
		sh(t, dir, "secret="+shellQuote(fresh.Encode())+"\nurl="+shellQuote(srv.URL+"/hook")+"\n"+recipe(t, "send"))
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("the receiver refused the curl recipe's request: %v", err)
			}
		default:
			t.Fatal("curl sent nothing")
		}
	})
}
