// Package docs is sandbox-bot's documentation: one Markdown file per
// reader's question (operating.md, configuration.md, sandbox-yml.md,
// lifecycle.md, security.md, agents.md, testing.md) and the README's
// pictures. Its tests keep every relative link and anchor of README.md
// and docs/*.md resolving and every Go package saying its role.
package docs
