package asmpd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"

	"github.com/asmp-dev/asmp/asmpd"
)

// The full server (the built-in workflows, the ledger, the console, /mcp)
// on a free loopback port, in memory, and one request to it.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	d, err := asmpd.Open(ctx, asmpd.Config{Addr: "127.0.0.1:0", DB: ":memory:"})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	req, _ := http.NewRequest("GET", d.URL()+"/", nil)
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	var frame struct {
		NextStates []struct {
			Action string `json:"action"`
		} `json:"next_states"`
	}
	err = json.NewDecoder(res.Body).Decode(&frame)
	res.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status)
	for _, n := range frame.NextStates {
		fmt.Println(n.Action)
	}

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// 200 OK
	// start:config-wizard-v1
	// start:expense-approval-v1
	// start:number-facts-v1
}
