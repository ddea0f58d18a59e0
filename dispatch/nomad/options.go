// Package nomad runs sandboxes as Nomad batch jobs, for an organization whose
// work outgrows one machine. It implements dispatch.Backend with the official
// github.com/hashicorp/nomad/api client:
//
//   - one batch job per run, built in Go (BuildJob), registered create-only
//     (EnforceIndex with modify index 0) so a redelivered webhook or a second
//     bot replica cannot start a second sandbox;
//   - the per-issue lock is a Nomad Variable written with check-and-set;
//   - the installation token is a Variable under nomad/jobs/<job-id>, which
//     the job's workload identity may read, rendered by a template into
//     secrets/token and refreshed by the bot while the run lives;
//   - runs are watched through one shared event stream (Job and Allocation
//     topics) that reconnects from the last index it saw; progress comes from
//     following the allocation's stdout; result.json is read from
//     alloc/data when the allocation ends.
package nomad

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rs/zerolog"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Defaults that an operator rarely needs to change.
const (
	DefaultJobPrefix = "sandbox-"
	// DefaultKillTimeout covers the runner's push-on-SIGTERM path: commit,
	// push over a slow link, write the interrupted receipt. Nomad clients
	// cap it with client.max_kill_timeout (default 30s), which must be
	// raised to at least this value.
	DefaultKillTimeout    = 60 * time.Second
	DefaultRunGrace       = 15 * time.Minute
	DefaultDisconnectStop = 2 * time.Minute
	DefaultLogDrain       = 10 * time.Second
	DefaultCPU            = 2000  // MHz
	DefaultMemoryMB       = 4096  // MB
	DefaultDiskMB         = 20480 // MB, scheduling hint for images and the workspace
	DefaultPriority       = 50
	// DefaultNamespace is the Nomad namespace sandboxes run in, apart
	// from the bot's own job: the bot's token may exec in allocations
	// here (the live page's preview and screencast) and nowhere else.
	DefaultNamespace = "sandbox"
	// DefaultNodePool keeps sandboxes off the nodes of everything else,
	// the bot included: a sandbox that escaped its container must find
	// neither the App's private key nor other jobs' secrets on its node.
	// deploy/nomad/client.hcl puts sandbox clients in this pool.
	DefaultNodePool = "sandbox"
	// TokenItem is the item of the job's Variable holding the token.
	TokenItem = "token"
)

// Paths inside the sandbox container. The docker driver mounts the task's
// local/ and secrets/ directories and the shared alloc/ directory at these
// places.
const (
	WorkOrderPath = "/local/work-order.json"
	TokenPath     = "/secrets/token"
	OutputDir     = "/alloc/data"
	// ResultPath is result.json relative to the allocation directory, the
	// way AllocFS addresses files.
	ResultPath = "alloc/data/" + "result.json"
	// DockerDataDir is the inner daemon's storage: a directory of the task,
	// bound to /var/lib/docker, so it never becomes an anonymous volume
	// that outlives the allocation on the host.
	DockerDataDir = "docker-data"
	TaskName      = "sandbox"
	GroupName     = "sandbox"
)

// Resources of one sandbox.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// EnvItemPrefix marks the Variable items that are sandbox environment.
const EnvItemPrefix = "env_"

type Resources struct {
	CPU      int // MHz
	MemoryMB int
	DiskMB   int
}

// Limits are the ceilings a repository's .sandbox.yml may ask for.
type Limits struct {
	MaxCPU      int
	MaxMemoryMB int
}

// Options configure a Backend. Image is required; everything else has a
// default that works on a stock Nomad 2.x cluster whose clients carry the
// snippet in deploy/nomad/client.hcl.
type Options struct {
	// Client talks to Nomad. When nil, one is built from Config, or from
	// api.DefaultConfig() (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_NAMESPACE,
	// NOMAD_REGION ...) when Config is nil too.
	Client *api.Client
	Config *api.Config

	// Image is the sandbox image reference.
	Image string
	// Isolation is the default profile, privileged or caps; a RunSpec may
	// override it. Empty means privileged.
	Isolation dispatch.Isolation

	Region string
	// Namespace is where sandboxes run: their jobs, allocations, events
	// and token Variables (a job's workload identity reads
	// nomad/jobs/<job> in its own namespace only). Empty:
	// DefaultNamespace. The bot's ACL policy grants alloc-exec here and
	// nowhere else, so the bot's own job must not run in it.
	Namespace string
	// StateNamespace holds the bot's own Variables: the per-issue locks,
	// the run queue, kept sessions. Empty: the client's namespace
	// (NOMAD_NAMESPACE, else "default"), the bot's own.
	StateNamespace string
	Datacenters    []string // empty: ["*"], every datacenter
	// NodePool is where sandboxes run; empty: DefaultNodePool. Setting the
	// bot's own pool lets sandboxes share its nodes.
	NodePool    string
	Constraints []*api.Constraint
	Priority    int

	// KillTimeout is how long Nomad waits after SIGTERM before SIGKILL.
	KillTimeout time.Duration
	// RunGrace is added to the work order's timeout_minutes to form the
	// group's max_run_duration: the runner stops itself at the timeout,
	// Nomad stops a sandbox that did not.
	RunGrace time.Duration
	// DisconnectStop is how long a client cut off from the servers keeps
	// the sandbox before stopping it, so a replacement run on another node
	// does not push to the same branch for long.
	DisconnectStop time.Duration

	Defaults Resources
	Limits   Limits
	// PidsLimit bounds the sandbox's processes, inner containers included
	// (the docker driver's pids_limit); zero leaves the client's default.
	PidsLimit int

	// SecretsUID and SecretsGID own the files the runner alone may read
	// (secrets/token, the work order); default dispatch.RunnerUID, the
	// image's runner account: the agent runs as dispatch.AgentUID.
	SecretsUID, SecretsGID int
	// DenyNets are what no sandbox may reach beyond link-local: the Nomad
	// API (NOMAD_ADDR's addresses), the bot, the operator's networks.
	// Every job also denies the Nomad agent of its own node
	// (NodeAgentDenyNet).
	DenyNets []dispatch.DenyNet
	// HostWall denies every sandbox its node: the node's own address
	// (${attr.unique.network.ip-address}, every port: the Nomad client's
	// API, Consul's agent, whatever is bound to all addresses), its
	// default route's gateway and host.docker.internal (the init reads
	// those itself), except HostAllow, the host ports the operator lists.
	HostWall  bool
	HostAllow []dispatch.HostAllow

	// JobPrefix starts every job id the bot creates; the watcher ignores
	// jobs without it.
	JobPrefix string
	// Purge removes the job from Nomad in Cleanup; otherwise the job is
	// stopped and left to Nomad's garbage collector.
	Purge bool
	// Env is given to every sandbox (the model provider's API key, a
	// proxy). The values are secrets: they travel in the run's Variable
	// next to the token and are rendered into the task's environment by a
	// template, so they never appear in the job.
	Env map[string]string
	// Gateway holds the model providers and their keys. They travel in
	// the run's Variable and are rendered into secrets/gateway/, readable
	// by root only, where the sandbox's init reads them and serves the
	// model gateway; the agent never sees a key.
	Gateway *dispatch.GatewayConfig
	// SetupCache is the node's host volume of the setup cache; the zero
	// value leaves it out of the jobs.
	SetupCache SetupCache
	// OSVVolume is the node's host volume holding the operator's offline
	// OSV database, mounted read-only at dispatch.OSVMount in coding
	// sandboxes; empty leaves it out.
	OSVVolume string
	// LogDrain bounds how long Wait keeps reading the log after the
	// allocation ended, for the last progress lines.
	LogDrain time.Duration

	Logger zerolog.Logger
	Clock  func() time.Time
}

func (o *Options) setDefaults() error {
	if strings.TrimSpace(o.Image) == "" {
		return errors.New("nomad backend: Image (the sandbox image reference, SANDBOX_IMAGE) is required")
	}
	for k, v := range o.Env {
		if !envName.MatchString(k) {
			return fmt.Errorf("nomad backend: sandbox environment variable name %q is not a valid name", k)
		}
		if strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("nomad backend: sandbox environment variable %s holds a newline, which an env template cannot carry", k)
		}
	}
	iso, err := dispatch.ParseIsolation(string(o.Isolation))
	if err != nil {
		return fmt.Errorf("nomad backend: isolation %w", err)
	}
	o.Isolation = iso
	if len(o.Datacenters) == 0 {
		o.Datacenters = []string{"*"}
	}
	o.Priority = cmp.Or(o.Priority, DefaultPriority)
	if o.Priority < 1 || o.Priority > 100 {
		return fmt.Errorf("nomad backend: priority %d is outside 1..100", o.Priority)
	}
	o.KillTimeout = cmp.Or(o.KillTimeout, DefaultKillTimeout)
	o.RunGrace = cmp.Or(o.RunGrace, DefaultRunGrace)
	o.DisconnectStop = cmp.Or(o.DisconnectStop, DefaultDisconnectStop)
	o.LogDrain = cmp.Or(o.LogDrain, DefaultLogDrain)
	o.Defaults.CPU = cmp.Or(o.Defaults.CPU, DefaultCPU)
	o.Defaults.MemoryMB = cmp.Or(o.Defaults.MemoryMB, DefaultMemoryMB)
	o.Defaults.DiskMB = cmp.Or(o.Defaults.DiskMB, DefaultDiskMB)
	if o.Limits.MaxCPU > 0 && o.Defaults.CPU > o.Limits.MaxCPU {
		o.Defaults.CPU = o.Limits.MaxCPU
	}
	if o.Limits.MaxMemoryMB > 0 && o.Defaults.MemoryMB > o.Limits.MaxMemoryMB {
		o.Defaults.MemoryMB = o.Limits.MaxMemoryMB
	}
	o.SecretsUID = cmp.Or(o.SecretsUID, dispatch.RunnerUID)
	if o.SecretsGID == 0 {
		// The image creates the runner with a group of its own, same id.
		o.SecretsGID = dispatch.RunnerUID
	}
	o.NodePool = cmp.Or(o.NodePool, DefaultNodePool)
	o.Namespace = cmp.Or(o.Namespace, DefaultNamespace)
	o.JobPrefix = cmp.Or(o.JobPrefix, DefaultJobPrefix)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return nil
}
