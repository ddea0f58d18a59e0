package ocdb

import (
	"flag"
	"fmt"
	"io"

	"github.com/sandbox-bot/sandbox-bot/runner/harness/ocdb/occopy"
)

// Main is `sandbox-runner opencode-session save|restore`:
//
//	save    --db PATH --id ID --dir CHECKOUT             the tar of Save on stdout
//	restore --db PATH --id ID --from CHECKOUT --to CHECKOUT   the copy on stdin
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "save" && args[0] != "restore") {
		fmt.Fprintln(stderr, "usage: sandbox-runner "+occopy.Subcommand+" save|restore --db PATH --id ID ...")
		return 2
	}
	fs := flag.NewFlagSet(occopy.Subcommand+" "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("db", "", "the OpenCode database ($OPENCODE_DB)")
	id := fs.String("id", "", "the session")
	dir := fs.String("dir", "", "save: the checkout the session was made in")
	from := fs.String("from", "", "restore: the checkout the session was made in")
	to := fs.String("to", "", "restore: the checkout it continues in")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *path == "" || *id == "" {
		fmt.Fprintln(stderr, occopy.Subcommand+": --db and --id are required")
		return 2
	}
	var err error
	if args[0] == "save" {
		err = Save(*path, *id, *dir, stdout)
	} else {
		err = Restore(*path, *id, *from, *to, stdin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", occopy.Subcommand, args[0], err)
		return 1
	}
	return 0
}
