package nomad

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Job meta keys. The bot finds its runs again after a restart from these
// alone (List), so they carry everything in dispatch.Meta.
const (
	MetaTaskID         = "sandbox_task_id"
	MetaMode           = "sandbox_mode"
	MetaRepo           = "sandbox_repo"
	MetaNumber         = "sandbox_number"
	MetaInstallationID = "sandbox_installation_id"
	MetaAttempt        = "sandbox_attempt"
	MetaDeliveryID     = "sandbox_delivery_id"
	MetaHeadSHA        = "sandbox_head_sha"
	MetaRepoID         = "sandbox_repo_id"
	MetaIsolation      = "sandbox_isolation"
	MetaRequester      = "sandbox_requester"
	MetaModel          = "sandbox_model"
	// MetaSet, MetaVariant and MetaVariants: the run is attempt Variant
	// of Variants of one approval (Meta.Set).
	MetaSet      = "sandbox_set"
	MetaVariant  = "sandbox_variant"
	MetaVariants = "sandbox_variants"
)

// RuntimesAttr is the node attribute that lists the runtimes of a
// client's Docker engine, comma-separated (the docker driver's
// fingerprint); the gvisor profile's jobs are placed where it holds
// dispatch.GVisorRuntime.
const (
	RuntimesAttr      = "${attr." + runtimesAttribute + "}"
	runtimesAttribute = "driver.docker.runtimes"
)

// JobID is the Nomad job id of a run: the prefix, the task id and the mode,
// lower-cased so it also makes a tidy DNS label and container name.
func JobID(prefix, taskID string, mode dispatch.Mode) string {
	return prefix + strings.ToLower(taskID) + "-" + string(mode)
}

// jobPrefixOf is what every job of taskID starts with, whatever its mode.
func jobPrefixOf(prefix, taskID string) string {
	return prefix + strings.ToLower(taskID) + "-"
}

// TokenVarPath is the Variable holding a run's token. Nomad's implicit
// workload policy lets a job read nomad/jobs/<job-id> without any ACL
// policy being written for it.
func TokenVarPath(jobID string) string { return "nomad/jobs/" + jobID }

// BuildJob turns a run into the batch job Nomad runs. It is a pure function
// of its inputs, so the golden files in testdata pin the exact job for each
// mode and deploy/nomad/sandbox.nomad.hcl can be reviewed against them.
func BuildJob(o Options, spec dispatch.RunSpec) (*api.Job, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	order, err := placeOrder(o, spec)
	if err != nil {
		return nil, err
	}
	isolation := spec.Isolation
	if isolation == "" {
		isolation = o.Isolation
	}
	if _, err := dispatch.ParseIsolation(string(isolation)); err != nil {
		return nil, fmt.Errorf("build nomad job %s: isolation %w", order.TaskID, err)
	}
	if order.Mode == dispatch.ModeTask && isolation != dispatch.IsolationGVisor {
		// Task mode has neither profile's grants; gVisor's kernel is no
		// grant, and holds task runs too.
		isolation = "none"
	}
	res, err := resourcesFor(o, order)
	if err != nil {
		return nil, fmt.Errorf("build nomad job %s: %w", order.TaskID, err)
	}
	timeout := order.TimeoutMinutes
	if timeout <= 0 {
		timeout = order.Config.TimeoutMinutes
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("build nomad job %s: timeout_minutes is %d; the work order needs a positive timeout (its resolved configuration has one)", order.TaskID, timeout)
	}
	orderJSON, err := json.Marshal(order)
	if err != nil {
		return nil, fmt.Errorf("build nomad job %s: encode work order: %w", order.TaskID, err)
	}
	job := sandboxJob(o, spec.Meta, order, isolation)
	group := sandboxGroup(o, res, time.Duration(timeout)*time.Minute+o.RunGrace)
	task := sandboxTask(o, *job.ID, order, isolation, res, orderJSON)
	if order.Mode != dispatch.ModeTask {
		addSetupCache(o.SetupCache, group, task)
		addOSV(o.OSVVolume, group, task)
	}
	group.AddTask(task)
	job.AddTaskGroup(group)
	return job, nil
}

// placeOrder is the work order as the sandbox finds it in the allocation:
// the backend decides where things are inside the sandbox (the bot cannot
// know the allocation's layout). It must agree with the run's metadata.
func placeOrder(o Options, spec dispatch.RunSpec) (dispatch.WorkOrder, error) {
	order := spec.Order
	if order.SchemaVersion == 0 {
		order.SchemaVersion = dispatch.WorkOrderVersion
	}
	order.OutputDir = OutputDir
	if order.Mode != dispatch.ModeTask || order.TokenFile != "" || spec.Token != "" {
		order.TokenFile = TokenPath
	}
	order.GatewayFile = ""
	if o.Gateway != nil {
		order.GatewayFile = GatewayPath
	}
	if err := order.Validate(); err != nil {
		return order, fmt.Errorf("build nomad job: %w", err)
	}
	if spec.Meta.TaskID != "" && spec.Meta.TaskID != order.TaskID {
		return order, fmt.Errorf("build nomad job: meta task_id %q differs from work order task_id %q", spec.Meta.TaskID, order.TaskID)
	}
	if spec.Meta.Mode != "" && spec.Meta.Mode != order.Mode {
		return order, fmt.Errorf("build nomad job %s: meta mode %q differs from work order mode %q", order.TaskID, spec.Meta.Mode, order.Mode)
	}
	return order, nil
}

// sandboxJob is the batch job of one run, placed where it may run.
func sandboxJob(o Options, meta dispatch.Meta, order dispatch.WorkOrder, isolation dispatch.Isolation) *api.Job {
	id := JobID(o.JobPrefix, order.TaskID, order.Mode)
	job := api.NewBatchJob(id, id, o.Region, o.Priority)
	if o.Namespace != "" {
		job.Namespace = ptr(o.Namespace)
	}
	job.Datacenters = append([]string(nil), o.Datacenters...)
	job.NodePool = ptr(o.NodePool)
	for _, c := range o.Constraints {
		job.Constrain(api.NewConstraint(c.LTarget, c.Operand, c.RTarget))
	}
	switch isolation {
	case dispatch.IsolationPrivileged:
		// Place the sandbox only on clients whose docker plugin allows it,
		// instead of failing the task at start on the others.
		job.Constrain(api.NewConstraint("${attr.driver.docker.privileged.enabled}", "=", "true"))
	case dispatch.IsolationGVisor:
		// And only on clients whose engine has gVisor's runtime.
		job.Constrain(api.NewConstraint(RuntimesAttr, api.ConstraintSetContains, dispatch.GVisorRuntime))
	}
	job.Meta = jobMeta(meta, order, isolation)
	return job
}

// sandboxGroup is the job's one group: run once, for at most maxRun.
func sandboxGroup(o Options, res Resources, maxRun time.Duration) *api.TaskGroup {
	group := api.NewTaskGroup(GroupName, 1)
	// The bot decides about retries (continue mode); Nomad must not start
	// the same work from scratch behind its back.
	group.RestartPolicy = &api.RestartPolicy{Attempts: ptr(0), Mode: ptr(api.RestartPolicyModeFail)}
	group.ReschedulePolicy = &api.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)}
	group.Disconnect = &api.DisconnectStrategy{
		StopOnClientAfter: ptr(o.DisconnectStop),
		Replace:           ptr(false),
	}
	group.MaxRunDuration = ptr(maxRun)
	group.EphemeralDisk = &api.EphemeralDisk{SizeMB: ptr(res.DiskMB)}
	return group
}

// sandboxTask is the sandbox container: the image's init with the work
// order, the token and the gateway's providers rendered as files only the
// runner reads.
func sandboxTask(o Options, id string, order dispatch.WorkOrder, isolation dispatch.Isolation, res Resources, orderJSON []byte) *api.Task {
	taskMode := order.Mode == dispatch.ModeTask
	task := api.NewTask(TaskName, "docker")
	task.Config = dockerConfig(o.Image, isolation, taskMode)
	if o.PidsLimit > 0 {
		task.Config["pids_limit"] = o.PidsLimit
	}
	task.Env = map[string]string{
		dispatch.EnvWorkOrder: WorkOrderPath,
		dispatch.EnvDinD:      boolFlag(!taskMode),
		dispatch.EnvIsolation: string(isolation),
		dispatch.EnvTaskID:    order.TaskID,
	}
	// Task mode too: its init fences as root, then drops to the agent's
	// user (runner/sandboxinit/taskfence.go).
	task.Env[dispatch.EnvDenyNets] = denyNetsEnv(o.DenyNets, o.HostWall)
	if o.HostWall {
		task.Env[dispatch.EnvDenyHost] = "1"
	}
	if len(o.HostAllow) > 0 {
		task.Env[dispatch.EnvAllowHosts] = dispatch.FormatHostAllow(o.HostAllow)
	}
	task.Resources = &api.Resources{CPU: ptr(res.CPU), MemoryMB: ptr(res.MemoryMB)}
	task.KillTimeout = ptr(o.KillTimeout)
	task.KillSignal = "SIGTERM"
	task.LogConfig = &api.LogConfig{MaxFiles: ptr(5), MaxFileSizeMB: ptr(20)}
	// Task mode's init starts as root with the fence's capabilities alone
	// (dockerConfig), fences, and runs everything else as the agent's
	// user with none: no second identity, so that user must read its own
	// work order and token.
	secretsUID, secretsGID := o.SecretsUID, o.SecretsGID
	if taskMode {
		secretsUID, secretsGID = dispatch.AgentUID, dispatch.AgentUID
		task.User = "0:0"
		task.Env[dispatch.EnvTaskFence] = fmt.Sprintf("%d:%d", dispatch.AgentUID, dispatch.AgentUID)
	}
	task.Templates = []*api.Template{
		{
			// base64 keeps the issue text, which may contain "{{", out of
			// the template language.
			EmbeddedTmpl: ptr(`{{ base64Decode "` + base64.StdEncoding.EncodeToString(orderJSON) + `" }}`),
			DestPath:     ptr("local/work-order.json"),
			ChangeMode:   ptr("noop"),
			// The runner's alone, like the token: it names the secrets
			// given to the run and carries text only writers may see.
			Perms: ptr("0400"),
			Uid:   ptr(secretsUID),
			Gid:   ptr(secretsGID),
		},
	}
	if order.TokenFile != "" {
		task.Templates = append(task.Templates, &api.Template{
			EmbeddedTmpl: ptr(`{{ with nomadVar "` + TokenVarPath(id) + `" }}{{ .` + TokenItem + ` }}{{ end }}`),
			DestPath:     ptr("secrets/token"),
			// The runner's git credential helper reads the file on every
			// use, so a refreshed token needs no signal or restart.
			ChangeMode: ptr("noop"),
			// The runner's alone: the agent runs as another user.
			Perms: ptr("0400"),
			Uid:   ptr(secretsUID),
			Gid:   ptr(secretsGID),
		})
	}
	if order.GatewayFile != "" {
		task.Templates = append(task.Templates, gatewayTemplate(o, id, taskMode))
	}
	if len(o.Env) > 0 {
		task.Templates = append(task.Templates, &api.Template{
			EmbeddedTmpl: ptr(envTemplate(TokenVarPath(id), o.Env)),
			DestPath:     ptr("secrets/env"),
			Envvars:      ptr(true),
			ChangeMode:   ptr("noop"),
			Perms:        ptr("0400"),
		})
	}
	return task
}

// envTemplate renders the sandbox environment from the run's Variable, one
// KEY=value line per name; the values never enter the job.
func envTemplate(varPath string, env map[string]string) string {
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(`{{ with nomadVar "` + varPath + `" }}`)
	for _, k := range names {
		// toJSON quotes the value the way the env file parser reads it.
		b.WriteString(k + "={{ ." + EnvItemPrefix + k + " | toJSON }}\n")
	}
	b.WriteString("{{ end }}")
	return b.String()
}

func dockerConfig(image string, isolation dispatch.Isolation, taskMode bool) map[string]any {
	cfg := map[string]any{
		"image": image,
		"labels": []map[string]string{{
			"sandbox-bot.task": "${NOMAD_META_" + MetaTaskID + "}",
			"sandbox-bot.mode": "${NOMAD_META_" + MetaMode + "}",
		}},
	}
	if taskMode {
		// The init's, for its fence and its drop to the agent's user
		// (the docker plugin's allow_caps must list them).
		cfg["cap_drop"] = []string{"all"}
		cfg["cap_add"] = TaskCaps()
		cfg["security_opt"] = []string{"no-new-privileges"}
		if isolation == dispatch.IsolationGVisor {
			cfg["runtime"] = dispatch.GVisorRuntime
		}
		return cfg
	}
	// A relative host path binds a directory of the task itself, which the
	// docker plugin allows without docker.volumes.enabled and which Nomad
	// deletes with the allocation.
	cfg["volumes"] = []string{DockerDataDir + ":/var/lib/docker"}
	switch isolation {
	case dispatch.IsolationPrivileged:
		cfg["privileged"] = true
	case dispatch.IsolationCaps, dispatch.IsolationGVisor:
		cfg["cap_add"] = []string{"all"}
		cfg["cap_drop"] = []string{"sys_resource"}
		cfg["security_opt"] = []string{"seccomp=unconfined", "apparmor=unconfined"}
	}
	if isolation == dispatch.IsolationGVisor {
		// The grants are towards gVisor's kernel (the docker plugin's
		// allow_runtimes must list it).
		cfg["runtime"] = dispatch.GVisorRuntime
	}
	return cfg
}

func jobMeta(m dispatch.Meta, order dispatch.WorkOrder, isolation dispatch.Isolation) map[string]string {
	meta := map[string]string{
		MetaTaskID:    order.TaskID,
		MetaMode:      string(order.Mode),
		MetaAttempt:   strconv.Itoa(max(m.Attempt, order.Attempt, 1)),
		MetaIsolation: string(isolation),
	}
	set := func(k, v string) {
		if v != "" {
			meta[k] = v
		}
	}
	set(MetaRepo, firstNonEmpty(m.Repo, order.Repo))
	if n := max(m.Number, order.Number); n > 0 {
		meta[MetaNumber] = strconv.Itoa(n)
	}
	if m.InstallationID > 0 {
		meta[MetaInstallationID] = strconv.FormatInt(m.InstallationID, 10)
	}
	set(MetaDeliveryID, m.DeliveryID)
	set(MetaHeadSHA, m.HeadSHA)
	set(MetaRequester, m.Requester)
	set(MetaModel, m.Model)
	if id := max(m.RepoID, order.RepoID); id > 0 {
		meta[MetaRepoID] = strconv.FormatInt(id, 10)
	}
	if m.Set != "" {
		meta[MetaSet], meta[MetaVariant], meta[MetaVariants] = m.Set, strconv.Itoa(m.Variant), strconv.Itoa(m.Variants)
	}
	return meta
}

// metaFromJob is the inverse of jobMeta, for runs found after a restart.
func metaFromJob(meta map[string]string) dispatch.Meta {
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	inst, _ := strconv.ParseInt(meta[MetaInstallationID], 10, 64)
	repoID, _ := strconv.ParseInt(meta[MetaRepoID], 10, 64)
	return dispatch.Meta{
		RepoID:         repoID,
		TaskID:         meta[MetaTaskID],
		Mode:           dispatch.Mode(meta[MetaMode]),
		Repo:           meta[MetaRepo],
		Number:         atoi(meta[MetaNumber]),
		InstallationID: inst,
		Attempt:        atoi(meta[MetaAttempt]),
		DeliveryID:     meta[MetaDeliveryID],
		HeadSHA:        meta[MetaHeadSHA],
		Requester:      meta[MetaRequester],
		Model:          meta[MetaModel],
		Set:            meta[MetaSet],
		Variant:        atoi(meta[MetaVariant]),
		Variants:       atoi(meta[MetaVariants]),
	}
}

func resourcesFor(o Options, order dispatch.WorkOrder) (Resources, error) {
	r := o.Defaults
	want := order.Config.Resources
	if want.CPU < 0 || want.MemoryMB < 0 {
		return r, fmt.Errorf("resources: cpu %d and memory_mb %d must not be negative", want.CPU, want.MemoryMB)
	}
	if want.CPU > 0 {
		if o.Limits.MaxCPU > 0 && want.CPU > o.Limits.MaxCPU {
			return r, fmt.Errorf("resources.cpu %d MHz is over the server ceiling of %d", want.CPU, o.Limits.MaxCPU)
		}
		r.CPU = want.CPU
	}
	if want.MemoryMB > 0 {
		if o.Limits.MaxMemoryMB > 0 && want.MemoryMB > o.Limits.MaxMemoryMB {
			return r, fmt.Errorf("resources.memory_mb %d is over the server ceiling of %d", want.MemoryMB, o.Limits.MaxMemoryMB)
		}
		r.MemoryMB = want.MemoryMB
	}
	return r, nil
}

func boolFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

// NodeAgentDenyNet is the HTTP API of the Nomad agent on the sandbox's own
// node, which Nomad interpolates into the job's environment at placement.
const NodeAgentDenyNet = "${attr.unique.network.ip-address}:4646"

// NodeDenyNet is the node's own address, every port, which Nomad
// interpolates at placement: the host wall's part on Nomad.
const NodeDenyNet = "${attr.unique.network.ip-address}"

// denyNetsEnv is EnvDenyNets' value: the configured networks and the
// node's own agent, or the whole node behind the host wall.
func denyNetsEnv(nets []dispatch.DenyNet, hostWall bool) string {
	node := NodeAgentDenyNet
	if hostWall {
		node = NodeDenyNet
	}
	if s := dispatch.FormatDenyNets(nets); s != "" {
		return s + "," + node
	}
	return node
}

// TaskCaps are dispatch.TaskFenceCaps in the Nomad docker plugin's names.
func TaskCaps() []string {
	caps := dispatch.TaskFenceCaps()
	for i, c := range caps {
		caps[i] = strings.ToLower(c)
	}
	return caps
}
