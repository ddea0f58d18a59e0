package app

import "github.com/sandbox-bot/sandbox-bot/handlers"

// DefaultCheckName is the check run that shows a run's progress on its
// commits.
const DefaultCheckName = "sandbox-agent"

// handlerSettings are the parts of the configuration the handlers act on,
// with the defaults LoadConfig filled in: the configuration is the one
// place defaults are set, and handlers.NewBase refuses unset values.
func (c *Config) handlerSettings() handlers.Settings {
	return handlers.Settings{
		TriggerLabel: c.TriggerLabel, AllowUsers: c.AllowUsers, AllowTeams: c.AllowTeams, AllowBots: c.AllowBots,
		MaxContinues: c.MaxContinues, MaxPlanRounds: c.MaxPlanRounds, ProgressInterval: c.ProgressInterval, TokenRefresh: c.TokenRefresh,
		Defaults: c.Defaults, Limits: c.Limits, Isolation: c.Isolation, WebURL: c.GitHub.WebURL, SecretEnv: c.ProjectSecretEnv(),
		DispatchDeadline: c.Ops.DispatchDeadline, CheckName: DefaultCheckName, Caps: c.Caps,
		ReviewBatchWindow: c.Ops.ReviewBatchWindow, ResultRetry: c.Ops.ResultRetry, PreviewDuration: c.Ops.PreviewDuration,
		ArtifactCaps: c.Artifacts.Caps(), Images: c.images, CILogBytes: c.ciLog,
	}
}
