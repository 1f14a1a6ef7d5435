package cli

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// Errors carry the "asmp: " prefix once, also those of package client
// whose text starts with it.
func TestPrintErrorPrefixOnce(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("%w: run r after 8 reconnects: EOF", client.ErrStreamEnded):       "asmp: stream ended too soon: run r after 8 reconnects: EOF\n",
		errors.New("no server: give its URL"):                                        "asmp: no server: give its URL\n",
		&client.Error{Status: 404, Code: protocol.ENotFound, Hint: "Run not found."}: "asmp: Run not found.\n",
		fmt.Errorf("wrapped: %w", protocol.Errorf(protocol.EInvalid, "Bad input.")):  "asmp: Bad input.\n",
	} {
		var b bytes.Buffer
		printError(&b, err)
		if b.String() != want {
			t.Errorf("printError(%v) = %q, want %q", err, b.String(), want)
		}
	}
}
