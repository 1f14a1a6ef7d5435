package row_test

import (
	"fmt"

	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/protocol"
)

func ExampleDecode() {
	r, err := row.Decode([]byte(`{"type":"directory_row","command":"mytool",
		"args":[{"name":"input_file","type":"string","required":true}],
		"flags":[{"name":"verbose","type":"boolean","short_alias":"-v"}]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Command, r.InputKeys(), r.Method(), r.Format())

	_, err = row.Decode([]byte(`{"command":"mytool",
		"flags":[{"name":"verbose","type":"boolean","short_alias":"-vv"}]}`))
	fmt.Println(protocol.ErrorCode(err), protocol.Body(err)["field"])
	fmt.Println(err)
	// Output:
	// mytool [input_file verbose] exec text
	// invalid flags[0].short_alias
	// flags[0].short_alias "-vv" must match ^-[A-Za-z0-9]$
}
