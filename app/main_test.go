package app

import (
	"os"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The benchmarks that read receipts from PostgreSQL share one server.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
