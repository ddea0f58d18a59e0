package receipts_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/app/receipts/receiptstest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// The embedded store, one machine's default.
func TestSQLiteStore(t *testing.T) {
	t.Parallel()
	receiptstest.Run(t, func(t *testing.T) receiptstest.Opener {
		dir := t.TempDir()
		return func() (receipts.Store, error) { return receipts.OpenSQLite(dir) }
	})
}

// The shared store of several replicas, on a real PostgreSQL server.
func TestPostgresStore(t *testing.T) {
	t.Parallel()
	testenv.Postgres(t) // skips loudly (fails in CI) before any subtest when there is none
	receiptstest.Run(t, func(t *testing.T) receiptstest.Opener {
		url := testenv.Postgres(t)
		return func() (receipts.Store, error) { return receipts.OpenPostgres(context.Background(), url) }
	})
}

// A database URL that is not PostgreSQL's, or does not parse, is refused
// with what is wrong and without the password.
func TestPostgresURLErrors(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"mysql://u:hunter2@h/db", "postgres://u:hunter2@h:notaport/db", "/var/lib/receipts.db"} {
		_, err := receipts.OpenPostgres(context.Background(), url)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "database URL") {
			t.Errorf("OpenPostgres(%q): %v; want an error about the URL without its password", url, err)
		}
	}
}
