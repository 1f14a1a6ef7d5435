// Command noop is the ceiling of bench/run: a Go net/http server that
// answers every request, whatever its method and path, with the same fixed
// ~600-byte JSON body (the size of a State Frame) after reading the request
// body. Any asmp figure is quoted as a ratio of this server's figure for the
// same workload, measured in the same run on the same core.
//
//	noop --addr 127.0.0.1:0
//
// prints "listening on http://ADDR" on stderr, like asmp serve.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// body is a ~600-byte State Frame-shaped JSON object.
var body = func() []byte {
	const id = "01980f5e-7c1a-7b3e-9a4d-2f6b8c0d1e2f"
	base := "http://127.0.0.1:8000/runs/" + id
	s := `{"run_id":"` + id + `","workflow_id":"config-wizard-v1","resource_url":"http://127.0.0.1:8000",` +
		`"state":"CONFIGURE","status":"active","hint":"Enter a value and save.",` +
		`"next_states":[{"action":"save","method":"POST","href":"` + base + `/transitions/save","expects":{"value":"string"}}],` +
		`"stream_url":"` + base + `/stream",` +
		`"_links":{"cli":{"href":"` + base + `/cli","method":"GET"},"events":{"href":"` + base + `/events","method":"GET"},"self":{"href":"` + base + `","method":"GET"}}}`
	s += strings.Repeat(" ", max(0, 599-len(s))) + "\n"
	return []byte(s)
}()

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	length := strconv.Itoa(len(body))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hd := w.Header()
		hd.Set("Content-Type", "application/json")
		hd.Set("Content-Length", length)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
	fmt.Fprintf(os.Stderr, "noop listening on http://%s (%d-byte body)\n", ln.Addr(), len(body))
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	if err := hs.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
