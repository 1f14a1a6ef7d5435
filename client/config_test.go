package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/spec"
)

func TestConfigAndRegistry(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "servers.json")
	os.WriteFile(path, []byte(`{"servers":[{"id":"legal","base_url":"https://legal.example.com/asmp"},{"base_url":"http://127.0.0.1:8000"}]}`), 0o600)
	cfg, err := client.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 2 || cfg.Servers[1].Key() != "http://127.0.0.1:8000" {
		t.Fatalf("config = %+v", cfg)
	}
	reg, err := client.NewRegistry(cfg, &client.Options{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := reg.Lookup("legal"); !ok || s.BaseURL != "https://legal.example.com/asmp" {
		t.Fatalf("lookup = %+v %v", s, ok)
	}
	if err := reg.Add(client.ServerConfig{ID: "local", BaseURL: "http://localhost:9000"}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(client.ServerConfig{ID: "local", BaseURL: "http://localhost:9001"}); err == nil {
		t.Fatal("duplicate id accepted")
	}
	if err := reg.Add(client.ServerConfig{ID: "bad", BaseURL: "ftp://x"}); err == nil {
		t.Fatal("bad URL accepted")
	}
	c, err := reg.Client("local")
	if err != nil || c.BaseURL() != "http://localhost:9000" {
		t.Fatalf("client = %v %v", c, err)
	}
	if _, err := reg.Client("nope"); err == nil {
		t.Fatal("unknown id")
	}
	if n := len(reg.Servers()); n != 3 {
		t.Fatalf("%d servers", n)
	}
	for _, bad := range []string{
		`{"servers":[{"id":"x"}]}`,                  // base_url is required
		`{"servers":[{"base_url":"not a uri"}]}`,    // format: uri
		`{"servers":[{"base_url":"mailto:a@b.c"}]}`, // a URI, but not http(s)
		`{"servers":"x"}`,                           // wrong type
		`{"servers":[{"id":"a","base_url":"http://h"},{"id":"a","base_url":"http://i"}]}`,
		`[`,
	} {
		if _, err := client.ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%s) accepted", bad)
		}
	}
	if _, err := client.LoadConfig(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "client config") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestParseConfigAgreesWithSchema checks ParseConfig's own shape check
// against CLIENT_CONFIG.json: every document the schema refuses is refused,
// and every one it accepts (with valid, distinct base URLs) is accepted.
func TestParseConfigAgreesWithSchema(t *testing.T) {
	for _, doc := range []string{
		`{}`,
		`{"servers":[]}`,
		`{"servers":[{"base_url":"http://h"}]}`,
		`{"servers":[{"id":"a","base_url":"http://h"},{"id":"b","base_url":"https://i/asmp"}]}`,
		`{"servers":[{"base_url":"http://h","extra":1}],"other":true}`,
		`{"servers":[{"id":"x"}]}`,
		`{"servers":[{"base_url":7}]}`,
		`{"servers":[{"base_url":null}]}`,
		`{"servers":[{"id":3,"base_url":"http://h"}]}`,
		`{"servers":[{"id":null,"base_url":"http://h"}]}`,
		`{"servers":["http://h"]}`,
		`{"servers":[null]}`,
		`{"servers":{"base_url":"http://h"}}`,
		`{"servers":null}`,
		`{"servers":"x"}`,
		`[]`,
		`"x"`,
		`null`,
		`3`,
	} {
		schemaErr := spec.Validate(spec.ClientConfig, []byte(doc))
		_, err := client.ParseConfig([]byte(doc))
		if (schemaErr == nil) != (err == nil) {
			t.Errorf("%s: the schema says %v, ParseConfig says %v", doc, schemaErr, err)
		}
	}
}

// TestParseConfigHints checks that each shape error names what is wrong.
func TestParseConfigHints(t *testing.T) {
	for doc, want := range map[string]string{
		`{"servers":[{"id":"x"}]}`:                             "servers[0]: base_url is required",
		`{"servers":[{"base_url":"http://h"},{"base_url":7}]}`: "servers[1]: base_url must be a string",
		`{"servers":[{"id":3,"base_url":"http://h"}]}`:         "servers[0]: id must be a string",
		`{"servers":["http://h"]}`:                             "servers[0] must be an object",
		`{"servers":{"base_url":"http://h"}}`:                  "servers must be an array",
		`[]`:                                                   "it must be a JSON object",
		`{} {}`:                                                "more than one JSON value",
	} {
		if _, err := client.ParseConfig([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%s) = %v, want an error with %q", doc, err, want)
		}
	}
}
