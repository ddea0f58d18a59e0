// Command probe is the egress tests' client inside an inner container of a
// sandbox (a FROM-scratch image has no curl): for each URL argument it
// prints one line, "URL ok BODY", "URL refused", "URL timeout" or
// "URL error TEXT", with the milliseconds it took, so a test can tell a
// firewall's immediate refusal from a silent drop. A file:// argument
// prints "URL file" and the file's lines instead (what an inner container
// sees, e.g. its resolv.conf).
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

func main() {
	c := &http.Client{Timeout: 10 * time.Second}
	for _, u := range os.Args[1:] {
		if path, ok := strings.CutPrefix(u, "file://"); ok {
			b, err := os.ReadFile(path)
			fmt.Printf("%s file %v\n%s\n", u, err, b)
			continue
		}
		start := time.Now()
		resp, err := c.Get(u)
		ms := time.Since(start).Milliseconds()
		var ne net.Error
		switch {
		case err == nil:
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Printf("%s ok %s %dms\n", u, strings.TrimSpace(string(b)), ms)
		case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
			fmt.Printf("%s refused %dms\n", u, ms)
		case errors.As(err, &ne) && ne.Timeout():
			fmt.Printf("%s timeout %dms\n", u, ms)
		default:
			fmt.Printf("%s error %q %dms\n", u, err.Error(), ms)
		}
	}
}
