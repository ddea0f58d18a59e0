package handlers_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/handlers"
)

func TestParseMention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, text string
		found      bool
	}{
		{"@sandbox-bot add a cache", "add a cache", true},
		{"Hey @Sandbox-Bot, please add a cache.\nKeep it small.", "please add a cache.\nKeep it small.", true},
		{"@sandbox-bot[bot]: fix the typo", "fix the typo", true},
		{"thanks @sandbox-bot", "", true},
		{"Looks good, thanks @sandbox-bot! :)", "", true},
		{"@sandbox-bot /status", "/status", true},
		{"first line\n\n@sandbox-bot\n\ndo it", "do it", true},
		{"@sandbox-bot-fork do it", "", false},
		{"mail me@sandbox-bot.dev", "", false},
		{"see github.com/@sandbox-bot", "", false},
		{"```\n@sandbox-bot do it\n```", "", false},
		{"~~~md\n@sandbox-bot do it\n~~~", "", false},
		{"    @sandbox-bot do it", "", false},
		{"\t@sandbox-bot do it", "", false},
		{"run `@sandbox-bot do it` to start", "", false},
		{"run ``a ` @sandbox-bot do it`` to start", "", false},
		{"> @sandbox-bot do it", "", false},
		{"> quoted\n@sandbox-bot lazy continuation", "", false},
		{"<!-- @sandbox-bot do it -->", "", false},
		{"<!--\n@sandbox-bot do it\n-->", "", false},
		{"<details>\n@sandbox-bot do it\n</details>", "", false},
		// An unclosed backtick is literal text, so the mention counts.
		{"a ` then @sandbox-bot do it", "do it", true},
		{"`code` then @sandbox-bot do it", "do it", true},
		{"> quoted\n\n@sandbox-bot after the quote", "after the quote", true},
		{"no mention here", "", false},
	} {
		text, found := handlers.ParseMention(tc.body, "sandbox-bot")
		if text != tc.text || found != tc.found {
			t.Errorf("ParseMention(%q) = %q, %v; want %q, %v", tc.body, text, found, tc.text, tc.found)
		}
	}
	if _, found := handlers.ParseMention("@ do it", ""); found {
		t.Error("an unknown slug must match nothing")
	}
}

// Comment bodies are written by anyone: the mention parser must never
// panic and what it returns must be trimmed.
func FuzzParseMention(f *testing.F) {
	for _, s := range []string{"@sandbox-bot do it", "`@sandbox-bot`", "> @sandbox-bot", "``` @sandbox-bot", "@sandbox-bot[bot]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		text, found := handlers.ParseMention(body, "sandbox-bot")
		if !found && text != "" {
			t.Fatalf("ParseMention(%q) returned text %q without a mention", body, text)
		}
		if text != "" && (text[0] == ' ' || text[len(text)-1] == ' ' || text[len(text)-1] == '\n') {
			t.Fatalf("ParseMention(%q) text %q is not trimmed", body, text)
		}
	})
}
