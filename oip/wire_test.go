package oip_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/oip/wire"
)

// jsonShape describes the JSON a struct type reads and writes: each field's
// name, tag and type, embedded structs flattened, nested structs described
// the same way.
func jsonShape(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + jsonShape(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		return "[]" + jsonShape(t.Elem())
	case reflect.Struct:
		var fields []string
		for f := range t.Fields() {
			if !f.IsExported() {
				continue
			}
			if f.Anonymous {
				fields = append(fields, strings.Trim(jsonShape(f.Type), "{}"))
				continue
			}
			fields = append(fields, f.Name+" "+string(f.Tag)+" "+jsonShape(f.Type))
		}
		return "{" + strings.Join(fields, "; ") + "}"
	}
	return t.Kind().String()
}

// The directory and rows a client reads (package oip/wire) have the JSON
// of those the server writes (oip.DirectoryPage, row.Row), so that a field
// added on one side and not the other fails here.
func TestWireShapesMatchTheServer(t *testing.T) {
	for _, pair := range [][2]any{
		{row.Row{}, wire.Row{}},
		{oip.DirectoryPage{}, wire.DirectoryPage{}},
	} {
		server, client := jsonShape(reflect.TypeOf(pair[0])), jsonShape(reflect.TypeOf(pair[1]))
		if server != client {
			t.Errorf("%T and %T differ:\n%s\n%s", pair[0], pair[1], server, client)
		}
	}
	// A served page reads back into the wire type and writes the same bytes.
	var r row.Row
	if err := json.Unmarshal([]byte(`{"command":"t","description":"d","output_format":"json","invocation_method":"shell",
		"source_url":"https://x","schema":{"type":"object"},"timeout":2.5,
		"args":[{"name":"a","type":"string","required":true,"description":"x","default":"v"}],
		"flags":[{"name":"f","type":"boolean","required":false,"short_alias":"-f"}]}`), &r); err != nil {
		t.Fatal(err)
	}
	served, _ := json.Marshal(oip.DirectoryPage{Rows: []oip.DirectoryRow{{Key: "k", Type: "cli", Row: r, InvID: "inv_1"}}, Next: "k"})
	var page wire.DirectoryPage
	if err := json.Unmarshal(served, &page); err != nil {
		t.Fatal(err)
	}
	back, _ := json.Marshal(page)
	if string(back) != string(served) {
		t.Fatalf("round trip:\n%s\n%s", served, back)
	}
	if got := page.Rows[0]; got.Method() != r.Method() || got.Format() != r.Format() || !slices.Equal([]string{got.Args[0].Name, got.Flags[0].ShortAlias}, []string{"a", "-f"}) {
		t.Fatalf("wire row = %+v", got)
	}
}
