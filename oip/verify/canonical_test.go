package verify

import (
	"encoding/json"
	"testing"

	"github.com/asmp-dev/asmp/oip/wire"
)

// BenchmarkCanonicalJSON measures the canonical bytes of a directory row's
// record, what every append hashes.
func BenchmarkCanonicalJSON(b *testing.B) {
	r := wire.Record{InvID: "inv_01M8VSM2SD689A41F75Y16Z5YF", Seq: 8, Key: "my-cli-tool-v1", Type: "directory_row",
		Body:      json.RawMessage(`{"type":"directory_row","command":"echo","description":"Say it.","args":[{"name":"word","type":"string","required":true}],"flags":[{"name":"n","type":"boolean","short_alias":"-n"}]}`),
		Timestamp: "2026-12-02T16:32:52Z", Source: "admin", Supersedes: "inv_01M8VSM2S83RTWB2S3VR74CN9B"}
	for b.Loop() {
		if _, err := CanonicalJSON(r); err != nil {
			b.Fatal(err)
		}
	}
}

// The canonical bytes leave entry_hash out, and only the record's own: a
// body, source or reference holding the same text keeps it.
func TestCanonicalJSONDropsOnlyTheRecordsEntryHash(t *testing.T) {
	r := wire.Record{InvID: "inv_1", Seq: 1, Key: "k", Type: "directory_row", EntryHash: "ab",
		Body: json.RawMessage(`{"x":1,"entry_hash":""}`), Timestamp: "2026-12-02T16:32:52Z", Source: `s,"entry_hash":""`,
		ReplayedBy: []string{"inv_2"}, ReplayedByMore: true}
	c, err := CanonicalJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"body":{"entry_hash":"","x":1},"inv_ID":"inv_1","key":"k","seq":1,"source":"s,\"entry_hash\":\"\"","supersedes":null,"timestamp":"2026-12-02T16:32:52Z","type":"directory_row"}`
	if string(c) != want {
		t.Fatalf("canonical bytes\n%s\nwant\n%s", c, want)
	}
	back, err := DecodeCanonical(c)
	if err != nil || back.Source != r.Source || string(back.Body) != `{"entry_hash":"","x":1}` || back.ReplayedBy != nil || len(back.EntryHash) != 64 {
		t.Fatalf("DecodeCanonical = %+v, %v", back, err)
	}
}
