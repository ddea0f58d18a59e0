package main

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// --provider wins over $SANDBOX_PROVIDERS; a bad entry names its source.
func TestProviderFlagAndEnv(t *testing.T) {
	t.Parallel()
	c := newCLI(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, []string{"SANDBOX_PROVIDERS=env=http://e/v1,E_KEY"})
	o := &options{backend: "auto"}
	if err := c.dockerOptions(o, flags{}); err != nil {
		t.Fatal(err)
	}
	if len(o.providers) != 1 || o.providers[0] != (dispatch.ModelProvider{Name: "env", BaseURL: "http://e/v1", KeyEnv: "E_KEY"}) {
		t.Fatalf("from the environment: %+v", o.providers)
	}
	var f flags
	fs := c.flagSet("create", runCommands()["create"], &f)
	if err := fs.Parse([]string{"--provider", "mine=https://m/v1,M_KEY,anthropic", "--provider", "local=http://l/v1"}); err != nil {
		t.Fatal(err)
	}
	o = &options{backend: "auto"}
	if err := c.dockerOptions(o, f); err != nil {
		t.Fatal(err)
	}
	if len(o.providers) != 2 || o.providers[0].API != dispatch.APIAnthropic || o.providers[1].Name != "local" {
		t.Fatalf("from flags: %+v", o.providers)
	}
	if err := c.flagSet("create", runCommands()["create"], &flags{}).Parse([]string{"--provider", "nourl"}); err == nil {
		t.Fatal("--provider nourl accepted")
	}
	bad := newCLI(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, []string{"SANDBOX_PROVIDERS=nourl"})
	if err := bad.dockerOptions(&options{backend: "auto"}, flags{}); err == nil || !strings.Contains(err.Error(), "$SANDBOX_PROVIDERS") {
		t.Fatalf("bad $SANDBOX_PROVIDERS: %v", err)
	}
}
