package app

// DefaultCheckName is the check run that shows a run's progress on its
// commits.
const DefaultCheckName = "sandbox-agent"

// settle works out the handlers' settings that are not read as they are
// (Config embeds the rest, defaults filled in): the configuration is the
// one place defaults are set, and handlers.NewBase refuses unset values.
func (c *Config) settle() {
	c.CheckName = DefaultCheckName
	c.WebURL = c.GitHub.WebURL
	c.SecretEnv = c.ProjectSecretEnv()
	c.ArtifactCaps = c.Artifacts.Caps()
	c.Settings.Budgets = c.Budgets.Policy()
}
