package dispatch

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// Names shared by the bot's backends and the sandbox (its init and the
// runner). They are part of the contract between the two sides, so they live
// here, and neither side imports the other's packages for them.

// Environment variables a backend sets on the sandbox, read by its init
// (PID 1) and passed on to the runner.
const (
	// EnvWorkOrder is the path of the work order JSON inside the sandbox.
	EnvWorkOrder = "SANDBOX_WORK_ORDER"
	// EnvServicesFile is the path of the JSON map of service name to
	// address that the init process writes once services are healthy; the
	// runner resolves {name} placeholders from it.
	EnvServicesFile = "SANDBOX_SERVICES_FILE"
	// EnvDinD is "1" when init must start the inner Docker daemon and "0"
	// in task mode, which has no inner daemon (and, once its init has
	// fenced it, no privileges: EnvTaskFence).
	EnvDinD = "SANDBOX_DIND"
	// EnvIsolation is the sandbox's Isolation profile, or "none".
	EnvIsolation = "SANDBOX_ISOLATION"
	// EnvTaskID names the run in the sandbox's own logs.
	EnvTaskID = "SANDBOX_TASK_ID"
	// EnvOpenCodeConfigJSON carries the operator's opencode.json
	// (providers, base URLs, {env:VAR} keys) into a sandbox, where the host
	// path the operator's OPENCODE_CONFIG names does not exist.
	EnvOpenCodeConfigJSON = "SANDBOX_OPENCODE_CONFIG_JSON"
	// EnvDenyNets lists destinations (ParseDenyNets) the init fences off
	// for every process and inner container, on top of DefaultDenyNets:
	// the bot's listener, the Nomad API, the operator's extra networks.
	EnvDenyNets = "SANDBOX_DENY_NETS"
	// EnvDenyHost, "1", has the init fence off the machine the sandbox
	// runs on besides EnvDenyNets: its default routes' gateways (the
	// engine's bridge, the Nomad node's) and the addresses /etc/hosts
	// gives host.docker.internal, every port (see HostWall).
	EnvDenyHost = "SANDBOX_DENY_HOST"
	// EnvAllowHosts lists the host ports (ParseHostAllow) excepted from
	// the fence, evaluated before every deny: the operator's
	// SANDBOX_HOST_ALLOW and the ports the bot opens for the run.
	EnvAllowHosts = "SANDBOX_ALLOW_HOSTS"
	// EnvTaskFence, "UID:GID", marks a task-mode sandbox the backend
	// started as root with only TaskFenceCaps: the init installs the
	// egress defaults and the host wall, then runs as UID:GID (the
	// sandbox user) with no capabilities at all
	// (runner/sandboxinit/taskfence.go).
	EnvTaskFence = "SANDBOX_TASK_FENCE"
)

// TaskFenceCaps are the capabilities a task-mode sandbox starts with, the
// init's alone: NET_ADMIN and NET_RAW for iptables (legacy iptables opens
// a raw socket), SETUID and SETGID to become the sandbox user, SETPCAP to
// empty the bounding set first, and KILL for PID 1, which stays root to
// reap and must forward the engine's SIGTERM to the init that became the
// sandbox user. Docker's names; Nomad's are lower case.
func TaskFenceCaps() []string {
	return []string{"NET_ADMIN", "NET_RAW", "SETUID", "SETGID", "SETPCAP", "KILL"}
}

// Environment variables the runner reads, set by launchers that run it
// without a sandbox init (the process backend, the local CLI).
const (
	// EnvWorkspace is where the checkout goes (default: a temp directory).
	EnvWorkspace = "SANDBOX_WORKSPACE"
	// EnvStateDir keeps the agent session across runner processes.
	EnvStateDir = "SANDBOX_STATE_DIR"
	// EnvTemplatesDir holds operator overrides of the prompt templates.
	EnvTemplatesDir = "SANDBOX_TEMPLATES_DIR"
	// EnvPushInterval overrides the periodic push interval (a Go duration).
	EnvPushInterval = "SANDBOX_PUSH_INTERVAL"
	// EnvEnvFile is --env-file's default, for launchers that cannot pass
	// arguments (the process backend).
	EnvEnvFile = "SANDBOX_ENV_FILE"
	// EnvStartupGrace overrides how long the agent may take to print its
	// first event (a Go duration).
	EnvStartupGrace = "SANDBOX_AGENT_STARTUP_GRACE"
	// EnvAgentUser names the account the agent runs as when it is not the
	// runner's own: the sandbox init sets it when it starts the runner as
	// RunnerUser with the capabilities to switch users.
	EnvAgentUser = "SANDBOX_AGENT_USER"
	// EnvSetupCacheDir is the repository's setup cache directory, the
	// runner's alone (see dispatch/setupcache); unset, setup always runs.
	EnvSetupCacheDir = "SANDBOX_SETUP_CACHE_DIR"
	// EnvSetupCacheMaxSize bounds that directory (bytes, or "2GiB").
	EnvSetupCacheMaxSize = "SANDBOX_SETUP_CACHE_MAX_SIZE"
	// EnvSetupCacheNodeMaxSize bounds a Nomad node's setup cache volume,
	// every repository's entries (bytes); the init enforces it.
	EnvSetupCacheNodeMaxSize = "SANDBOX_SETUP_CACHE_NODE_MAX_SIZE"
	// EnvStartTimings is the file where the sandbox's init records its
	// start steps (and the inner daemon's start on first use), for the
	// receipt's timings.
	EnvStartTimings = "SANDBOX_START_TIMINGS"
	// EnvOSVDir is the operator's offline OSV advisory database (a
	// directory of OSV JSON files or OSV's per-ecosystem all.zip exports),
	// read-only; unset, dependency changes are listed without advisories.
	EnvOSVDir = "SANDBOX_OSV_DIR"
)

// OSVMount is where a container sandbox finds the operator's OSV database
// (SANDBOX_OSV_DIR on the bot's host), bound read-only; the init names it
// in the runner's environment when it is there.
const OSVMount = "/osv"

// The setup cache inside a sandbox: the docker backend binds the
// repository's directory at SetupCacheMount; on Nomad the node's host
// volume is mounted at SetupCacheNodeMount and the init binds the
// repository's directory of it at SetupCacheMount before anything else
// runs, then unmounts the rest.
const (
	SetupCacheMount     = CacheDir + "/setup"
	SetupCacheNodeMount = CacheDir + "/setup-node"
)

// SetupCacheRepoDir is repo's directory in a node's setup cache volume.
func SetupCacheRepoDir(root, repo string) string {
	return filepath.Join(root, url.PathEscape(strings.ToLower(repo)))
}

// The sandbox image's accounts. The runner's uid is fixed so that the
// docker backend can give it the task directory's token and work order.
const (
	RunnerUser = "runner"
	RunnerUID  = 1001
	AgentUser  = "sandbox"
	AgentUID   = 1000
)

// Paths inside a container sandbox (the docker backend binds the task
// directory's parts there; Nomad uses its own task directories).
const (
	WorkOrderPath = "/sandbox/work-order.json"
	SecretsDir    = "/sandbox/secrets"
	TokenPath     = SecretsDir + "/token"
	OutputDir     = "/sandbox/out"
	CacheDir      = "/cache"
	// PreviewDir is where the init offers the run's dev server to the bot
	// as a Unix socket (PreviewSocket), one connection forwarded to the dev
	// server's port per connection made: the bot reaches the dev server
	// through the task directory, and nothing in the sandbox listens on
	// the host's network. Only the init writes in it.
	PreviewDir    = "/run/sandbox-preview"
	PreviewSocket = "dev.sock"
	// ScreencastDir, under PreviewDir, is the runner's own (0711): its
	// socket (ScreencastSocket) streams frames of the agent's browser to
	// the bot, each a 4-byte big-endian length and a JPEG.
	ScreencastDir    = "screen"
	ScreencastSocket = "screen.sock"
	// BrowserDebugPort is where the agent's Chromium (started by
	// chrome-devtools-mcp) answers the DevTools protocol on the sandbox's
	// loopback, for the runner's screencast.
	BrowserDebugPort = 9333
	// SourcePath is a preview's code (WorkOrder.Source), read-only.
	SourcePath = "/sandbox/source.tar.gz"
)

// CacheTmpPrefix starts the name of a cache file being written; loaders
// skip such files and the init sweeps old ones.
const CacheTmpPrefix = ".tmp-"

// CachedImageFile is where the image cache directory dir keeps ref: query
// escaping makes one readable, reversible file name per reference
// ("redis%3A7.tar", "ghcr.io%2Fo%2Fsvc%3A1.tar"). Whoever fills the cache
// (the docker backend, an operator with `docker save`) uses this name.
func CachedImageFile(dir, ref string) string {
	return filepath.Join(dir, url.QueryEscape(ref)+".tar")
}

// Services is the content of the services file: placeholder name to
// host:port reachable from the runner.
type Services map[string]string

// Isolation is how a coding sandbox is confined by its host. Task mode runs
// with neither profile (no privileges, no inner daemon).
type Isolation string

// The isolation profiles.
const (
	// IsolationPrivileged runs the sandbox privileged (production default);
	// Nomad clients need the docker plugin's allow_privileged.
	IsolationPrivileged Isolation = "privileged"
	// IsolationCaps grants every capability but SYS_RESOURCE with seccomp
	// and AppArmor unconfined, for hosts that refuse privileged containers;
	// the sandbox's init remounts the cgroup hierarchies read-write. Nomad
	// clients need allow_caps = ["all"].
	IsolationCaps Isolation = "caps"
	// IsolationGVisor runs the caps profile's sandbox on gVisor's runtime
	// (GVisorRuntime): the capabilities and unconfined seccomp are towards
	// gVisor's kernel, which serves the sandbox's system calls itself, so
	// a kernel bug reachable from inside is gVisor's, not the host's. The
	// engine must have the runtime registered with --net-raw (the fences
	// are iptables rules in gVisor's netstack) and, for the docker
	// backend's preview and screencast sockets, --host-uds=create. Nomad
	// clients need allow_runtimes to list it and allow_caps = ["all"].
	IsolationGVisor Isolation = "gvisor"
)

// GVisorRuntime is the name the gvisor profile asks the engine for: the
// runtime gVisor's own documentation registers (runsc install).
const GVisorRuntime = "runsc"

// RuntimeCheckSocket is the socket the image's `init --check-runtime DIR`
// leaves in DIR: the host finds it there, a socket, only when the
// container's runtime lets the sandbox offer sockets to the host (gVisor's
// --host-uds=create), which the docker backend's preview and screencast
// need.
const RuntimeCheckSocket = "runtime.sock"

// RuntimeCheckHostSocket is the socket the host listens on in the runtime
// check's DIR; the check tries to connect to it and reports the outcome
// ("host-socket: opened" or "host-socket: refused ..."). A sandbox that can
// connect to a socket the host made (runsc --host-uds=open or all) could
// talk to whatever listens in a directory bound into it; the profile
// wants that refused.
const RuntimeCheckHostSocket = "host.sock"

// GVisorKernel reports whether a kernel release (uname -r, as the check
// and the sandbox's init read it) is gVisor's own rather than the host's.
func GVisorKernel(release string) bool {
	return strings.Contains(strings.ToLower(release), "gvisor")
}

// Isolations are the profiles, in the order an error lists them.
var Isolations = []Isolation{IsolationPrivileged, IsolationCaps, IsolationGVisor}

// ParseIsolation checks a profile name; "" is the default, privileged. Its
// error names the value; callers say where it came from.
func ParseIsolation(s string) (Isolation, error) {
	if s == "" {
		return IsolationPrivileged, nil
	}
	if i := Isolation(s); slices.Contains(Isolations, i) {
		return i, nil
	}
	return "", fmt.Errorf("%q is not %s, %s or %s", s, IsolationPrivileged, IsolationCaps, IsolationGVisor)
}
