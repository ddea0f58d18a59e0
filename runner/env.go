package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
)

// EnvSources are the layers of the environment given to setup, the agent
// and the checks, in the order DESIGN.md fixes: YAML defaults, .env,
// .env.local, ${VAR} from the run's secrets, --env-file; then {service}
// placeholders resolve to the in-sandbox service addresses.
type EnvSources struct {
	YAML     map[string]string // config.env
	RepoDir  string            // where .env and .env.local are read; empty in task mode
	Secrets  map[string]string // the run's secrets, by variable name
	EnvFile  string            // the CLI's --env-file; empty for the bot
	Services dispatch.Services // nil when no services file exists
}

// ResolvedEnv is the result: the variables, and what could not be resolved
// (reported in the log, never fatal: a .env file may use ${X} for its own
// tooling's expansion).
type ResolvedEnv struct {
	Vars       map[string]string
	Unresolved []string
}

var (
	dollarVar   = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	placeholder = regexp.MustCompile(`\{([a-z0-9][a-z0-9_-]*)\}`)
)

// ResolveEnv layers the sources.
func ResolveEnv(src EnvSources) (*ResolvedEnv, error) {
	vars := map[string]string{}
	for k, v := range src.YAML {
		vars[k] = v
	}
	if src.RepoDir != "" {
		for _, name := range []string{".env", ".env.local"} {
			m, err := readRepoDotenv(filepath.Join(src.RepoDir, name))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for k, v := range m {
				vars[k] = v
			}
		}
	}
	res := &ResolvedEnv{Vars: vars}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		vars[k] = dollarVar.ReplaceAllStringFunc(vars[k], func(m string) string {
			name := m[2 : len(m)-1]
			if v, ok := src.Secrets[name]; ok {
				return v
			}
			res.Unresolved = append(res.Unresolved, fmt.Sprintf("%s: ${%s} is not a secret given to the run", k, name))
			return m
		})
	}
	if src.EnvFile != "" {
		m, err := ReadDotenv(src.EnvFile)
		if err != nil {
			return nil, fmt.Errorf("--env-file: %w", err)
		}
		for k, v := range m {
			vars[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		var missing []string
		vars[k] = placeholder.ReplaceAllStringFunc(vars[k], func(m string) string {
			name := m[1 : len(m)-1]
			if addr, ok := src.Services[name]; ok {
				return addr
			}
			missing = append(missing, name)
			return m
		})
		for _, name := range missing {
			if src.Services != nil {
				return nil, fmt.Errorf("env %s: placeholder {%s} names no running service (running: %s)", k, name, strings.Join(slices.Sorted(maps.Keys(src.Services)), ", "))
			}
			res.Unresolved = append(res.Unresolved, fmt.Sprintf("%s: {%s} left as is (no services file: %s is not set)", k, name, dispatch.EnvServicesFile))
		}
	}
	return res, nil
}

// ReadServices reads the services file the sandbox init writes.
func ReadServices(path string) (dispatch.Services, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("services file %s (%s): %w", path, dispatch.EnvServicesFile, err)
	}
	var s dispatch.Services
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("services file %s (%s): not a JSON object of name to host:port: %w", path, dispatch.EnvServicesFile, err)
	}
	return s, nil
}

// ReadDotenv parses a .env file (see dotenv.Parse for the format).
func ReadDotenv(path string) (map[string]string, error) { return dotenv.Read(path) }

// ParseDotenv is ReadDotenv on bytes; name is used in errors.
func ParseDotenv(name string, data []byte) (map[string]string, error) {
	return dotenv.Parse(name, data)
}

// readRepoDotenv is ReadDotenv for a file of the checkout, which the agent
// (or whoever wrote the branch) controls: it must be a regular file, never
// a link to something only the runner can read (the token).
func readRepoDotenv(path string) (map[string]string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link; a .env file of the repository must be a regular file", path)
		}
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ParseDotenv(path, b)
}

// mergeEnv returns base with vars set (replacing earlier values).
func mergeEnv(base []string, vars map[string]string) []string {
	out := make([]string, 0, len(base)+len(vars))
	for _, e := range base {
		if i := strings.IndexByte(e, '='); i > 0 {
			if _, ok := vars[e[:i]]; ok {
				continue
			}
		}
		out = append(out, e)
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out
}

// lookupEnv finds key in a KEY=VALUE list.
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if strings.HasPrefix(env[i], key+"=") {
			return env[i][len(key)+1:], true
		}
	}
	return "", false
}

// openCodeConfigEnv writes dispatch.EnvOpenCodeConfigJSON, when env has it, to a
// file in stateDir and points OPENCODE_CONFIG at it, so OpenCode layers it
// under the runner's own overlay as it would the operator's file. The
// variable itself is dropped: setup and checks have no use for it.
func openCodeConfigEnv(env []string, stateDir string, agent *AgentUser) ([]string, error) {
	content, ok := lookupEnv(env, dispatch.EnvOpenCodeConfigJSON)
	if !ok {
		return env, nil
	}
	env = dotenv.Without(env, dispatch.EnvOpenCodeConfigJSON)
	if strings.TrimSpace(content) == "" {
		return env, nil
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(content), &doc); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object (an opencode.json): %w", dispatch.EnvOpenCodeConfigJSON, err)
	}
	p := filepath.Join(stateDir, "opencode-operator.json")
	// 0600: provider keys may be written in it literally.
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", dispatch.EnvOpenCodeConfigJSON, err)
	}
	// OpenCode runs as the agent and must read it.
	if err := agent.give(p); err != nil {
		return nil, err
	}
	return append(dotenv.Without(env, "OPENCODE_CONFIG"), "OPENCODE_CONFIG="+p), nil
}
