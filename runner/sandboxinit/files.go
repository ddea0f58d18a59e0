package sandboxinit

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// handOver gives the sandbox user what it must write: the output directory
// (a bind from the host) and the shared caches.
func (ids identities) handOver(a account) error {
	if ids.order != nil && ids.order.OutputDir != "" {
		if err := os.MkdirAll(ids.order.OutputDir, 0o755); err != nil {
			return fmt.Errorf("create output dir: %w", err)
		}
		if err := os.Lchown(ids.order.OutputDir, a.UID, a.GID); err != nil {
			return fmt.Errorf("give output dir %s to %s: %w", ids.order.OutputDir, a.Name, err)
		}
	}
	for _, d := range []string{"npm", "go", "pip"} {
		p := filepath.Join(ids.opts.cacheDir, d)
		if isDir(p) {
			if err := os.Lchown(p, a.UID, a.GID); err != nil {
				ids.log.Warn().Err(err).Str("cache", p).Msg("cache not handed to the sandbox user")
			}
		}
	}
	return nil
}

// cacheEnv points the package managers at the shared caches that are
// mounted. Their own formats tolerate concurrent users and killed writers.
func cacheEnv(dir string) map[string]string {
	env := map[string]string{}
	if isDir(filepath.Join(dir, "npm")) {
		env["npm_config_cache"] = filepath.Join(dir, "npm")
	}
	if isDir(filepath.Join(dir, "go")) {
		env["GOMODCACHE"] = filepath.Join(dir, "go", "mod")
		env["GOCACHE"] = filepath.Join(dir, "go", "build")
	}
	if isDir(filepath.Join(dir, "pip")) {
		env["PIP_CACHE_DIR"] = filepath.Join(dir, "pip")
	}
	return env
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func envName(service string) string {
	return strings.ToUpper(strings.ReplaceAll(service, "-", "_"))
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), 0o644)
}

func writeEnvFile(path string, env map[string]string) error {
	var b strings.Builder
	keys := sortedNames(env)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(env[k]))
	}
	return writeFileAtomic(path, []byte(b.String()), 0o644)
}

func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

const hostsMarker = "# sandbox service"

// addHosts makes service names resolve in the sandbox itself, where the
// runner and the agent run (inner containers resolve them through the
// inner network's DNS).
func addHosts(path string, svcs dispatch.Services) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasSuffix(l, hostsMarker) {
			keep = append(keep, l)
		}
	}
	names := sortedNames(svcs)
	sort.Strings(names)
	for _, name := range names {
		host := svcs[name]
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "127.0.0.1" || host == "localhost" {
			continue
		}
		keep = append(keep, fmt.Sprintf("%s\t%s %s", host, name, hostsMarker))
	}
	// /etc/hosts is a bind mount from the outer runtime: write in place.
	return os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}
