package main

import (
	"regexp"
	"strings"
)

// ANSI styles for the terminal rendering of a plan.
const (
	ansiReset     = "\x1b[0m"
	ansiBold      = "\x1b[1m"
	ansiDim       = "\x1b[2m"
	ansiUnderline = "\x1b[4m"
	ansiCyan      = "\x1b[36m"
)

var (
	mdBold   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	mdCode   = regexp.MustCompile("`([^`]+)`")
	mdBullet = regexp.MustCompile(`^(\s*)[-*+] `)
)

// renderMarkdown renders the markdown a plan is written in for a terminal:
// headings, bold, inline code, code blocks and bullets. Without a terminal
// the markdown is returned unchanged, which reads fine in a log.
func renderMarkdown(md string, terminal bool) string {
	if !terminal {
		return md
	}
	var out []string
	inCode := false
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			inCode = !inCode
			continue
		}
		if inCode {
			out = append(out, ansiDim+"    "+line+ansiReset)
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			text := strings.TrimSpace(strings.TrimLeft(trimmed, "#"))
			style := ansiBold
			if strings.HasPrefix(trimmed, "# ") || strings.HasPrefix(trimmed, "## ") {
				style = ansiBold + ansiUnderline
			}
			out = append(out, style+text+ansiReset)
			continue
		}
		line = mdBullet.ReplaceAllString(line, "$1• ")
		line = mdBold.ReplaceAllString(line, ansiBold+"$1"+ansiReset)
		line = mdCode.ReplaceAllString(line, ansiCyan+"$1"+ansiReset)
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
