package handlers_test

import (
	"net/http"
	"os"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// TestMain lets the test binary double as a project's dev server (the
// media scenario): with HANDLERS_TEST_SERVE=1 it serves its working
// directory on $PORT. Scenarios spend most of their time waiting (on the
// bot's timers and the fake GitHub), so unless -parallel is given they run
// four per CPU instead of one.
func TestMain(m *testing.M) {
	if os.Getenv("HANDLERS_TEST_SERVE") == "1" {
		http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), http.FileServer(http.Dir(".")))
		os.Exit(0)
	}
	testenv.ParallelPerCPU(4)
	os.Exit(m.Run())
}
