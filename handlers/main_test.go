package handlers_test

import (
	"net/http"
	"os"
	"testing"
)

// TestMain lets the test binary double as a project's dev server (the
// media scenario): with HANDLERS_TEST_SERVE=1 it serves its working
// directory on $PORT.
func TestMain(m *testing.M) {
	if os.Getenv("HANDLERS_TEST_SERVE") == "1" {
		http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), http.FileServer(http.Dir(".")))
		os.Exit(0)
	}
	os.Exit(m.Run())
}
