package secretscan

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// The allowlists a repository already has, read from its base branch
// (never from the change under scan, which the agent wrote): a finding
// one of them accepts is reported and does not block the push.
const (
	IgnoreFile = ".gitleaksignore"
	ConfigFile = ".gitleaks.toml"
)

// Allowlist is the repository's: .gitleaksignore fingerprints, the
// allowlists of its .gitleaks.toml (its rules are not run: only gitleaks'
// defaults are), and .sandbox.yml's secrets.allow.
type Allowlist struct {
	ignore   map[string]bool
	gitleaks []targeted
	sandbox  []sandboxcfg.SecretAllow
}

type targeted struct {
	a     *config.Allowlist
	rules []string // empty: every rule
}

// LoadAllowlist reads the three sources; an empty one is skipped. A
// .gitleaks.toml gitleaks cannot read is an error the caller reports (and
// scans without it: a broken allowlist accepts nothing).
func LoadAllowlist(ignoreFile, configFile []byte, allow []sandboxcfg.SecretAllow) (*Allowlist, error) {
	a := &Allowlist{ignore: map[string]bool{}, sandbox: allow}
	sc := bufio.NewScanner(bytes.NewReader(ignoreFile))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		a.ignore[strings.ReplaceAll(line, `\`, "/")] = true
	}
	if len(bytes.TrimSpace(configFile)) == 0 {
		return a, nil
	}
	gl, err := gitleaksAllowlists(configFile)
	if err != nil {
		return a, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	a.gitleaks = gl
	return a, nil
}

// gitleaksAllowlists translates the [[allowlists]] (and the older
// [allowlist]) of a gitleaks configuration with gitleaks' own code, one at
// a time so that each keeps its targetRules. [extend] and [[rules]] are
// dropped: the scan runs gitleaks' default rules, and a configuration must
// not make the runner read other files or URLs.
func gitleaksAllowlists(file []byte) ([]targeted, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(bytes.NewReader(file)); err != nil {
		return nil, err
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return nil, err
	}
	if vc.AllowList != nil {
		vc.Allowlists = append(vc.Allowlists, vc.AllowList)
	}
	var out []targeted
	for _, al := range vc.Allowlists {
		rules := al.TargetRules
		al.TargetRules = nil
		one := config.ViperConfig{Allowlists: vc.Allowlists[:0:0]}
		one.Allowlists = append(one.Allowlists, al)
		c, err := one.Translate()
		if err != nil {
			return nil, err
		}
		for _, t := range c.Allowlists {
			out = append(out, targeted{a: t, rules: rules})
		}
	}
	return out, nil
}

// accepts names the allowlist that accepts f, or "".
func (a *Allowlist) accepts(f Finding) string {
	if a == nil {
		return ""
	}
	fp := fmt.Sprintf("%s:%s:%d", f.File, f.Rule, f.Line)
	if a.ignore[fp] || (f.Commit != "" && a.ignore[f.Commit+":"+fp]) {
		return IgnoreFile
	}
	for _, t := range a.gitleaks {
		if len(t.rules) > 0 && !containsString(t.rules, f.Rule) {
			continue
		}
		if gitleaksAccepts(t.a, f) {
			return ConfigFile
		}
	}
	for i, s := range a.sandbox {
		if s.Rule != "" && s.Rule != f.Rule {
			continue
		}
		if ok, _ := doublestar.Match(s.Path, f.File); ok {
			return ".sandbox.yml secrets.allow[" + strconv.Itoa(i) + "]"
		}
	}
	return ""
}

// gitleaksAccepts is gitleaks' own rule for an allowlist and a finding:
// with condition AND every criterion it names must hold, otherwise any.
func gitleaksAccepts(al *config.Allowlist, f Finding) bool {
	target := f.secret
	switch al.RegexTarget {
	case "match":
		target = f.match
	case "line":
		target = f.line
	}
	commit, _ := al.CommitAllowed(f.Commit)
	path := al.PathAllowed(f.File)
	regex := al.RegexAllowed(target)
	stop, _ := al.ContainsStopWord(f.secret)
	if al.MatchCondition != config.AllowlistMatchAnd {
		return commit || path || regex || stop
	}
	checks := []struct {
		named, ok bool
	}{{len(al.Commits) > 0, commit}, {len(al.Paths) > 0, path}, {len(al.Regexes) > 0, regex}, {len(al.StopWords) > 0, stop}}
	any := false
	for _, c := range checks {
		if c.named {
			any = true
			if !c.ok {
				return false
			}
		}
	}
	return any
}

func containsString(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
