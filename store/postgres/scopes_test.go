package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/storetest"
)

// A dispatcher's scopes are written in the transaction of the signed
// append: when writing them fails (here a trigger refuses them), the
// append fails whole, and no signed record is left without its scopes;
// once they can be written the next append stores both.
func TestScopesFailTheirAppend(t *testing.T) {
	t.Parallel()
	u := testURL(t)
	schema := freshSchema(t, u)
	s := open(t, u, schema, nil)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	fn := pgx.Identifier{schema, "scopes_fail"}.Sanitize()
	table := pgx.Identifier{schema, "ledger_scopes"}.Sanitize()
	storetest.ScopesFailTheirAppend(t, s, func() {
		for _, q := range []string{
			`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no room for the scopes'; END $$`,
			`CREATE TRIGGER scopes_fail BEFORE INSERT ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}, func() {
		if _, err := conn.Exec(ctx, `DROP TRIGGER scopes_fail ON `+table); err != nil {
			t.Fatal(err)
		}
	})
	if got, want := s.Capabilities(), (store.Capabilities{Durable: true, Shared: true, GroupCommit: true}); got != want {
		t.Fatalf("Capabilities = %+v, want %+v", got, want)
	}
}
