package app

import "github.com/sandbox-bot/sandbox-bot/app/githubtest"

// The App the benchmarks and load tests sign deliveries for.
const (
	testSecret       = "s3cret-webhook"
	testInstallation = 42
)

var testKey = githubtest.AppKey()
