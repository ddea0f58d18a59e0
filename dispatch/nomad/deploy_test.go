package nomad_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
)

// TestReferenceJobMatchesBuildJob keeps deploy/nomad/sandbox.nomad.hcl in
// step with the job the Go code builds: every decision BuildJob makes must
// appear in the reference job with the same value.
func TestReferenceJobMatchesBuildJob(t *testing.T) {
	t.Parallel()
	hcl := deployFile(t, "sandbox.nomad.hcl")
	s := spec(dispatch.ModeExecute, "ref")
	job, err := nomad.BuildJob(nomad.Options{Image: testImage, HostWall: true}, s)
	if err != nil {
		t.Fatal(err)
	}
	g := job.TaskGroups[0]
	task := g.Tasks[0]
	want := []string{
		`type = "batch"`,
		fmt.Sprintf(`priority = %d`, *job.Priority),
		`attribute = "${attr.driver.docker.privileged.enabled}" operator = "=" value = "true"`,
		fmt.Sprintf(`group "%s" { count = %d`, *g.Name, *g.Count),
		fmt.Sprintf(`restart { attempts = %d mode = "%s" }`, *g.RestartPolicy.Attempts, *g.RestartPolicy.Mode),
		fmt.Sprintf(`reschedule { attempts = %d unlimited = %v }`, *g.ReschedulePolicy.Attempts, *g.ReschedulePolicy.Unlimited),
		fmt.Sprintf(`disconnect { stop_on_client_after = "%s" replace = %v }`, minutes(*g.Disconnect.StopOnClientAfter), *g.Disconnect.Replace),
		fmt.Sprintf(`default = "%s"`, minutes(*g.MaxRunDuration)),
		fmt.Sprintf(`ephemeral_disk { size = %d }`, *g.EphemeralDisk.SizeMB),
		fmt.Sprintf(`task "%s" { driver = "%s"`, task.Name, task.Driver),
		`privileged = true`,
		fmt.Sprintf(`volumes = ["%s"]`, task.Config["volumes"].([]string)[0]),
		fmt.Sprintf(`SANDBOX_WORK_ORDER = "%s"`, task.Env[dispatch.EnvWorkOrder]),
		fmt.Sprintf(`SANDBOX_DIND = "%s"`, task.Env[dispatch.EnvDinD]),
		fmt.Sprintf(`SANDBOX_DENY_NETS = "%s"`, task.Env[dispatch.EnvDenyNets]),
		fmt.Sprintf(`SANDBOX_DENY_HOST = "%s"`, task.Env[dispatch.EnvDenyHost]),
		fmt.Sprintf(`variable "node_pool" { type = string default = "%s" }`, *job.NodePool),
		fmt.Sprintf(`variable "namespace" { type = string default = "%s" }`, *job.Namespace),
		`namespace = var.namespace`,
		fmt.Sprintf(`destination = "%s" change_mode = "%s" perms = "%s" uid = %d # the image's runner user (dispatch.RunnerUID) gid = %d`, *task.Templates[0].DestPath, *task.Templates[0].ChangeMode, *task.Templates[0].Perms, *task.Templates[0].Uid, *task.Templates[0].Gid),
		fmt.Sprintf(`destination = "%s" change_mode = "%s" perms = "%s" uid = %d # the image's runner user (dispatch.RunnerUID) gid = %d`, *task.Templates[1].DestPath, *task.Templates[1].ChangeMode, *task.Templates[1].Perms, *task.Templates[1].Uid, *task.Templates[1].Gid),
		`data = "{{ base64Decode \"${var.work_order_b64}\" }}"`,
		`data = "{{ with nomadVar \"nomad/jobs/sandbox-${lower(var.task_id)}-${var.mode}\" }}{{ .token }}{{ end }}"`,
		fmt.Sprintf(`cpu = %d`, *task.Resources.CPU),
		fmt.Sprintf(`memory = %d`, *task.Resources.MemoryMB),
		fmt.Sprintf(`kill_signal = "%s" kill_timeout = "%ds"`, task.KillSignal, int(task.KillTimeout.Seconds())),
		fmt.Sprintf(`logs { max_files = %d max_file_size = %d }`, *task.LogConfig.MaxFiles, *task.LogConfig.MaxFileSizeMB),
	}
	cached, err := nomad.BuildJob(nomad.Options{Image: testImage, SetupCache: nomad.SetupCache{Volume: "sandbox-setup-cache"}}, s)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range cached.TaskGroups[0].Volumes {
		want = append(want, fmt.Sprintf(`volume "%s" { type = "%s" source = "%s" read_only = %v }`, name, v.Type, v.Source, v.ReadOnly))
	}
	for _, m := range cached.TaskGroups[0].Tasks[0].VolumeMounts {
		want = append(want, fmt.Sprintf(`volume_mount { volume = "%s" destination = "%s" read_only = %v }`, *m.Volume, *m.Destination, *m.ReadOnly))
	}
	for _, w := range want {
		if !strings.Contains(hcl, w) {
			t.Errorf("deploy/nomad/sandbox.nomad.hcl lacks %s", w)
		}
	}
}

func minutes(d interface{ Minutes() float64 }) string {
	return fmt.Sprintf("%dm", int(d.Minutes()))
}

// The bot's own job and the sandboxes do not share nodes by default: the
// bot's jobspec stays in Nomad's "default" pool, sandboxes go to theirs,
// and the sandbox client configuration joins that pool.
func TestBotAndSandboxesDoNotShareANodePool(t *testing.T) {
	bot, client := deployFile(t, "sandbox-bot.nomad.hcl"), deployFile(t, "client.hcl")
	if !strings.Contains(bot, `node_pool = "default"`) {
		t.Error(`deploy/nomad/sandbox-bot.nomad.hcl must place the bot in node_pool "default"`)
	}
	if strings.Contains(bot, `node_pool = "`+nomad.DefaultNodePool+`"`) {
		t.Errorf("the bot's jobspec names the sandbox pool %q", nomad.DefaultNodePool)
	}
	if !strings.Contains(client, `node_pool = "`+nomad.DefaultNodePool+`"`) {
		t.Errorf("deploy/nomad/client.hcl must put sandbox clients in node_pool %q", nomad.DefaultNodePool)
	}
	job, err := nomad.BuildJob(nomad.Options{Image: testImage}, spec(dispatch.ModeExecute, "pool"))
	if err != nil {
		t.Fatal(err)
	}
	if *job.NodePool == "default" {
		t.Error("sandbox jobs default to the bot's node pool")
	}
}

// Sandboxes and the bot live in different namespaces, and the bot's policy
// grants alloc-exec (and every other job capability) in the sandboxes'
// only: the namespace spec creates the one BuildJob uses, the bot's
// jobspec points the bot at it and stays out of it, and the policy's
// namespace rules say so.
func TestBotExecsInTheSandboxNamespaceOnly(t *testing.T) {
	t.Parallel()
	job, err := nomad.BuildJob(nomad.Options{Image: testImage}, spec(dispatch.ModeExecute, "ns"))
	if err != nil {
		t.Fatal(err)
	}
	if *job.Namespace != nomad.DefaultNamespace {
		t.Errorf("sandbox jobs go to namespace %q, want %q", *job.Namespace, nomad.DefaultNamespace)
	}
	if spec := deployFile(t, "sandbox.namespace.hcl"); !strings.Contains(spec, `name = "`+nomad.DefaultNamespace+`"`) {
		t.Errorf("deploy/nomad/sandbox.namespace.hcl does not create namespace %q", nomad.DefaultNamespace)
	}
	bot := deployFile(t, "sandbox-bot.nomad.hcl")
	if !strings.Contains(bot, `variable "sandbox_namespace" { type = string default = "`+nomad.DefaultNamespace+`" }`) || !strings.Contains(bot, "SANDBOX_NOMAD_NAMESPACE = var.sandbox_namespace") {
		t.Error("deploy/nomad/sandbox-bot.nomad.hcl does not send sandboxes to their namespace")
	}
	if strings.Contains(bot, " NOMAD_NAMESPACE = ") {
		t.Error("the bot's jobspec overrides NOMAD_NAMESPACE: its own state belongs in its own namespace")
	}
	p := deployPolicy(t)
	for _, r := range p.Namespaces {
		if r.Name != nomad.DefaultNamespace && (len(r.Capabilities) > 0 || r.Policy != "") {
			t.Errorf("the policy grants %v %q in namespace %q; only the sandboxes' may have job capabilities", r.Capabilities, r.Policy, r.Name)
		}
	}
}

// The client configuration lets the gvisor profile's jobs run: its docker
// plugin allows the runtime they ask for and the capabilities they add.
func TestClientConfigAllowsTheGVisorProfile(t *testing.T) {
	t.Parallel()
	client := deployFile(t, "client.hcl")
	s := spec(dispatch.ModeExecute, "gvisor")
	s.Isolation = dispatch.IsolationGVisor
	job, err := nomad.BuildJob(nomad.Options{Image: testImage, HostWall: true}, s)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := job.TaskGroups[0].Tasks[0].Config["runtime"].(string)
	for _, want := range []string{`allow_runtimes = ["runc", "` + rt + `"]`, `allow_caps = ["all"]`} {
		if rt == "" || !strings.Contains(client, want) {
			t.Errorf("deploy/nomad/client.hcl lacks %s (the job asks for runtime %q)", want, rt)
		}
	}
}

// deployFile is deploy/nomad/name with its white space folded to single
// spaces, for the tests to look for settings in.
func deployFile(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nomad", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(raw)), " ")
}
