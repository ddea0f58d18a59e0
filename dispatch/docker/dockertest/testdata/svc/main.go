// Command svc is the service the sandbox tests run on the inner Docker
// daemon: a static binary in a FROM-scratch image, since no registry is
// reachable to pull a real one. It listens on $PORT (default 8080) after
// $DELAY_MS milliseconds, so health probes have something to wait for, and
// answers /health with "ok". With CRASH=1 it exits at once with an error.
package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	if os.Getenv("CRASH") == "1" {
		fmt.Fprintln(os.Stderr, "svc: crashing as asked (CRASH=1)")
		os.Exit(1)
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	if ms, err := strconv.Atoi(os.Getenv("DELAY_MS")); err == nil && ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	})
	fmt.Println("svc: listening on :" + port)
	if err := http.ListenAndServe(":"+port, nil); err != nil {
		fmt.Fprintln(os.Stderr, "svc:", err)
		os.Exit(1)
	}
}
