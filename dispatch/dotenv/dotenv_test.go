package dotenv_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
)

// Quote's output reads back as the value it was given.
func TestQuoteRoundTrips(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "plain", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n", `a "quoted" \ back\slash`, "tab\there", "# not a comment", "it's"} {
		got, err := dotenv.Parse("t.env", []byte("K="+dotenv.Quote(v)+"\n"))
		if err != nil {
			t.Fatalf("Quote(%q): %v", v, err)
		}
		if got["K"] != v {
			t.Errorf("Quote(%q) read back as %q", v, got["K"])
		}
	}
}
