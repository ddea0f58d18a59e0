// Package dotenv reads .env files: the repository's .env layers in the
// sandbox, the CLI's --env-file, and the bot's SANDBOX_ENV_FILE, which
// `sandbox-bot setup` writes.
package dotenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Read parses the .env file at path (see Parse).
func Read(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// Parse reads a .env file's content: KEY=VALUE lines, optional `export `,
// comments, single quotes (literal), double quotes (with \n, \" and \\
// escapes, may span lines). Errors name the file (name) and line.
func Parse(name string, data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		eq := strings.IndexByte(line, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("%s:%d: expected KEY=VALUE", name, lineNo)
		}
		key := strings.TrimSpace(line[:eq])
		if !envKey.MatchString(key) {
			return nil, fmt.Errorf("%s:%d: %q is not a valid variable name", name, lineNo, key)
		}
		val := strings.TrimSpace(line[eq+1:])
		switch {
		case strings.HasPrefix(val, "'"):
			end := strings.IndexByte(val[1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("%s:%d: unterminated single quote", name, lineNo)
			}
			val = val[1 : end+1]
		case strings.HasPrefix(val, `"`):
			start := lineNo
			raw := val[1:]
			for !closedQuote(raw) {
				if !sc.Scan() {
					return nil, fmt.Errorf("%s:%d: unterminated double quote", name, start)
				}
				lineNo++
				raw += "\n" + sc.Text()
			}
			val = unescape(raw[:closingQuote(raw)])
		default:
			if i := strings.Index(val, " #"); i >= 0 {
				val = strings.TrimSpace(val[:i])
			}
		}
		out[key] = val
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func closedQuote(s string) bool { return closingQuote(s) >= 0 }

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Quote writes value as a double-quoted .env value that Parse reads back
// exactly, newlines included (a PEM key fits on one line).
func Quote(value string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\r", "")
	return `"` + r.Replace(value) + `"`
}

// Without returns env (KEY=VALUE entries, as os.Environ gives them)
// without the entries of the given keys: what a child process must not
// inherit, or what is set again after it.
func Without(env []string, keys ...string) []string {
	out := make([]string, 0, len(env))
next:
	for _, e := range env {
		for _, k := range keys {
			if strings.HasPrefix(e, k+"=") {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}
