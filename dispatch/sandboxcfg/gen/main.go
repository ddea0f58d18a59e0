// Command gen writes the JSON Schema of .sandbox.yml (run through
// `go generate ./dispatch/sandboxcfg`); the package's tests fail when the
// committed file differs from what the model produces.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

func main() {
	out := flag.String("o", "sandbox.schema.json", "file to write the schema to")
	flag.Parse()
	b, err := sandboxcfg.MarshalSchema()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
