package handlers

import (
	"bytes"
	"context"
	"strings"
	"unicode"

	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// An @mention of the App hands it work the way people hand work to other
// coding agents: "@sandbox-bot add a cache to the client". It follows the
// command grammar's rules of where text counts (commandable): a mention
// the rendered comment shows as code (fenced, indented or an inline code
// span), quotes, hides in an HTML comment or folds into <details> is not
// addressed to the bot.

// ParseMention finds the first mention of @slug (or @slug[bot]) on a line
// a reader sees as ordinary text and returns what follows it: the rest of
// that line and every later line, trimmed. found is false when the comment
// does not address the App.
func ParseMention(body, slug string) (text string, found bool) {
	if slug == "" {
		return "", false
	}
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	ok := commands.Commandable(lines)
	for i, raw := range lines {
		if !ok[i] {
			continue
		}
		end := mentionEnd(blankCodeSpans(raw), slug)
		if end < 0 {
			continue
		}
		rest := strings.TrimLeft(raw[end:], " \t,:;—-")
		if tail := strings.Join(lines[i+1:], "\n"); strings.TrimSpace(tail) != "" {
			rest += "\n" + tail
		}
		rest = strings.TrimSpace(rest)
		// "thanks @bot!" asks for nothing: punctuation is not instructions.
		if !strings.ContainsFunc(rest, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
			rest = ""
		}
		return rest, true
	}
	return "", false
}

// mentionEnd returns the index just after the first "@slug" in line that
// GitHub would render as a mention, or -1. A mention starts a word (so
// "me@slug.dev" is an address, not a mention) and ends the login (so
// "@slug-fork" is someone else).
func mentionEnd(line, slug string) int {
	// ASCII only (slugs are ASCII): strings.ToLower may change the length
	// of a line that is not valid UTF-8, and the indices are the line's.
	lower, want := asciiLower(line), "@"+asciiLower(slug)
	for from := 0; ; {
		i := strings.Index(lower[from:], want)
		if i < 0 {
			return -1
		}
		i += from
		end := i + len(want)
		from = end
		if i > 0 && wordByte(lower[i-1]) || end < len(lower) && loginByte(lower[end]) {
			continue
		}
		end += len(botSuffix(lower[end:]))
		return end
	}
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func botSuffix(s string) string {
	if strings.HasPrefix(s, "[bot]") {
		return "[bot]"
	}
	return ""
}

// loginByte: GitHub logins are letters, digits and hyphens.
func loginByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// wordByte: what before an "@" makes it part of a word (an e-mail address,
// a path), not a mention.
func wordByte(c byte) bool { return loginByte(c) || c == '.' || c == '/' }

// blankCodeSpans replaces inline code spans (a run of backticks, text, the
// same run) by spaces of the same length, so a mention inside one is not
// found and the indices of the rest stay those of the line. A backtick run that no run of the same
// length closes is literal text, as in CommonMark.
func blankCodeSpans(line string) string {
	b := []byte(line)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		closeAt := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(b) && b[j+m] == '`' {
				m++
			}
			if m == n {
				closeAt = j + m
				break
			}
			j += m
		}
		if closeAt < 0 {
			i += n
			continue
		}
		for k := i; k < closeAt; k++ {
			b[k] = ' '
		}
		i = closeAt
	}
	return string(b)
}

// mayAddress is the cheap test the comment adapters run on every comment before
// decoding it: a command needs a "/", a mention the App's "@slug". Before
// the App's identity is known any "@" may be one.
func (b *Base) mayAddress(body []byte) bool {
	if bytes.IndexByte(body, '/') >= 0 {
		return true
	}
	slug := b.c.slug()
	if slug == "" {
		return bytes.IndexByte(body, '@') >= 0
	}
	return bytes.Contains(bytes.ToLower(body), []byte("@"+strings.ToLower(slug)))
}

// slug is the App's slug once LoadIdentity has read it, else "". It does
// not wait for a LoadIdentity in progress (the intake calls it).
func (c *core) slug() string {
	if login := c.trust.login.Load(); login != nil {
		return strings.TrimSuffix(*login, "[bot]")
	}
	return ""
}

// mention hands the table a comment that mentions the App and holds no
// command: on an issue it starts the label's flow with the text as the
// writer's instructions (on a plan awaiting approval it revises it), on
// the App's pull request it is review feedback, on any other pull request
// it gets a short reply saying what the bot does there. "@bot /status" is
// the command after the mention.
func (b *Base) mention(ctx context.Context, t thread, body string) error {
	login, err := b.c.LoadIdentity(ctx)
	if err != nil {
		return err
	}
	slug := strings.TrimSuffix(login, "[bot]")
	text, found := ParseMention(body, slug)
	if !found {
		return nil
	}
	trigger := commentTrigger(t.commentID)
	if strings.HasPrefix(text, "/") {
		if cmd, perr := commands.ParseCommand(text); cmd != nil || perr != nil {
			_, err := b.on(ctx, t, commandEvent(cmd, perr, trigger))
			return err
		}
	}
	ev := event{kind: lifecycle.Mention, text: text, trigger: trigger, tried: "hand work to @" + slug,
		problem: "Mention me with what to change in the plan, e.g. `@" + slug + " use the existing date helper`."}
	if t.isPR {
		ev.problem = "Mention me with what to change, e.g. `@" + slug + " use the existing date helper`."
	}
	_, err = b.on(ctx, t, ev)
	return err
}
