package nomad_test

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the jobs BuildJob makes")

func goldenOptions() nomad.Options {
	return nomad.Options{
		Image:       testImage,
		Namespace:   "sandboxes",
		Region:      "global",
		Datacenters: []string{"dc1", "dc2"},
		NodePool:    "sandbox",
		Constraints: []*api.Constraint{api.NewConstraint("${node.class}", "=", "dind")},
		Limits:      nomad.Limits{MaxCPU: 8000, MaxMemoryMB: 16384},
		PidsLimit:   4096,
	}
}

func withSetupCache(o *nomad.Options) {
	o.SetupCache = nomad.SetupCache{Volume: "sandbox-setup-cache", MaxBytes: 2 << 30, NodeMaxBytes: 20 << 30}
}

func withOSV(o *nomad.Options) {
	withSetupCache(o)
	o.OSVVolume = "sandbox-osv"
}

// TestBuildJobGolden pins the job of every mode. The golden files were
// reviewed field by field against Nomad's job specification (job, group,
// restart, reschedule, disconnect, ephemeral_disk, task, docker driver,
// template, resources, logs); deploy/nomad/sandbox.nomad.hcl is the same
// job in HCL.
func TestBuildJobGolden(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		spec      dispatch.RunSpec
		isolation dispatch.Isolation
		opts      func(*nomad.Options)
	}{
		{"plan", spec(dispatch.ModePlan, "1"), "", nil},
		{"execute", spec(dispatch.ModeExecute, "2"), "", nil},
		{"execute-caps", spec(dispatch.ModeExecute, "2"), dispatch.IsolationCaps, nil},
		// gVisor's runtime, on nodes whose engine has it; task mode too.
		{"execute-gvisor", spec(dispatch.ModeExecute, "2"), dispatch.IsolationGVisor, nil},
		{"task-gvisor", spec(dispatch.ModeTask, "6"), dispatch.IsolationGVisor, nil},
		{"revise", spec(dispatch.ModeRevise, "3"), "", nil},
		{"continue", spec(dispatch.ModeContinue, "4"), "", nil},
		{"rebase", spec(dispatch.ModeRebase, "5"), "", nil},
		{"task", spec(dispatch.ModeTask, "6"), "", nil},
		// Provider keys only in secrets/gateway/ (gateway_test.go checks it).
		{"execute-gateway", spec(dispatch.ModeExecute, "7"), "", withGateway},
		// The node's setup cache volume, mounted where the init narrows it
		// to the run's repository; task mode never gets it.
		{"plan-setup-cache", spec(dispatch.ModePlan, "8"), "", withSetupCache},
		{"task-setup-cache", spec(dispatch.ModeTask, "9"), "", withSetupCache},
		// The operator's OSV database, read-only, beside the setup cache;
		// task mode never gets it.
		{"execute-osv", spec(dispatch.ModeExecute, "10"), "", withOSV},
		{"task-osv", spec(dispatch.ModeTask, "11"), "", withOSV},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec
			s.Isolation = tc.isolation
			o := goldenOptions()
			if tc.opts != nil {
				tc.opts(&o)
			}
			job, err := nomad.BuildJob(o, s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(job, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			if strings.Contains(string(got), testToken) {
				t.Fatal("the token is in the job")
			}
			path := filepath.Join("testdata", tc.name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./dispatch/nomad -run TestBuildJobGolden -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("job for %s differs from %s (rerun with -update after reviewing the change):\n%s", tc.name, path, got)
			}
			checkJob(t, job, s)
		})
	}
}

// checkJob asserts the job's contract in the terms of Nomad's jobspec, then
// again after api's own Canonicalize (what the agent does on register), so
// a default Nomad fills in cannot undo a decision.
func checkJob(t *testing.T, job *api.Job, s dispatch.RunSpec) {
	t.Helper()
	for _, phase := range []string{"built", "canonical"} {
		if phase == "canonical" {
			job.Canonicalize()
		}
		fail := func(format string, args ...any) { t.Helper(); t.Errorf(phase+": "+format, args...) }
		taskMode := s.Order.Mode == dispatch.ModeTask
		wantID := "sandbox-" + strings.ToLower(s.Order.TaskID) + "-" + string(s.Order.Mode)
		if *job.ID != wantID || *job.Type != api.JobTypeBatch {
			fail("job id %s type %s, want %s batch", *job.ID, *job.Type, wantID)
		}
		if *job.Namespace != "sandboxes" || *job.NodePool != "sandbox" || strings.Join(job.Datacenters, ",") != "dc1,dc2" {
			fail("placement: namespace %s node_pool %s datacenters %v", *job.Namespace, *job.NodePool, job.Datacenters)
		}
		if job.Meta[nomad.MetaTaskID] != s.Order.TaskID || job.Meta[nomad.MetaMode] != string(s.Order.Mode) || job.Meta[nomad.MetaInstallationID] != "777" || job.Meta[nomad.MetaAttempt] != "1" {
			fail("meta %v", job.Meta)
		}
		if len(job.TaskGroups) != 1 || len(job.TaskGroups[0].Tasks) != 1 {
			fail("want one group with one task")
			return
		}
		g := job.TaskGroups[0]
		if *g.Count != 1 || *g.RestartPolicy.Attempts != 0 || *g.RestartPolicy.Mode != "fail" {
			fail("restart %+v count %d", g.RestartPolicy, *g.Count)
		}
		if *g.ReschedulePolicy.Attempts != 0 || *g.ReschedulePolicy.Unlimited {
			fail("reschedule attempts %d unlimited %v", *g.ReschedulePolicy.Attempts, *g.ReschedulePolicy.Unlimited)
		}
		if g.Disconnect == nil || *g.Disconnect.Replace || *g.Disconnect.StopOnClientAfter != nomad.DefaultDisconnectStop {
			fail("disconnect %+v", g.Disconnect)
		}
		if want := 60*time.Minute + nomad.DefaultRunGrace; *g.MaxRunDuration != want {
			fail("max_run_duration %v, want %v", *g.MaxRunDuration, want)
		}
		task := g.Tasks[0]
		if task.Driver != "docker" || task.Config["image"] != testImage {
			fail("driver %s image %v", task.Driver, task.Config["image"])
		}
		if *task.KillTimeout != 60*time.Second || task.KillSignal != "SIGTERM" {
			fail("kill_timeout %v signal %s", *task.KillTimeout, task.KillSignal)
		}
		if *task.Resources.CPU != nomad.DefaultCPU || *task.Resources.MemoryMB != nomad.DefaultMemoryMB {
			fail("resources %d MHz %d MB", *task.Resources.CPU, *task.Resources.MemoryMB)
		}
		if task.Env[dispatch.EnvWorkOrder] != nomad.WorkOrderPath {
			fail("env %v", task.Env)
		}
		_, privileged := task.Config["privileged"]
		_, volumes := task.Config["volumes"]
		_, caps := task.Config["cap_add"]
		gvisor := s.Isolation == dispatch.IsolationGVisor
		onRunsc := len(job.Constraints) == 2 && job.Constraints[1].LTarget == "${attr.driver.docker.runtimes}" &&
			job.Constraints[1].Operand == "set_contains" && job.Constraints[1].RTarget == "runsc"
		if rt, _ := task.Config["runtime"].(string); (rt == "runsc") != gvisor || onRunsc != gvisor {
			fail("runtime %q constraints %v: gVisor's runtime exactly for the gvisor profile, placed where the engine has it", rt, job.Constraints)
		}
		switch {
		case taskMode:
			// The init's fence capabilities alone, which it drops with
			// the bounding set before the runner starts.
			capAdd, _ := task.Config["cap_add"].([]string)
			capDrop, _ := task.Config["cap_drop"].([]string)
			secOpt, _ := task.Config["security_opt"].([]string)
			if privileged || volumes || task.Env[dispatch.EnvDinD] != "0" || len(task.Templates) != 1 ||
				!slices.Equal(capAdd, []string{"net_admin", "net_raw", "setuid", "setgid", "setpcap", "kill"}) ||
				!slices.Equal(capDrop, []string{"all"}) || !slices.Equal(secOpt, []string{"no-new-privileges"}) {
				fail("task mode must run with the fence's capabilities alone, without inner daemon or token: %v env %v", task.Config, task.Env)
			}
		case s.Isolation == dispatch.IsolationCaps || gvisor:
			if privileged || !caps || task.Config["cap_drop"].([]string)[0] != "sys_resource" || len(task.Config["security_opt"].([]string)) != 2 {
				fail("caps profile config %v", task.Config)
			}
		default:
			if task.Config["privileged"] != true || len(job.Constraints) != 2 || job.Constraints[1].LTarget != "${attr.driver.docker.privileged.enabled}" {
				fail("privileged profile config %v constraints %v", task.Config, job.Constraints)
			}
		}
		if !taskMode {
			if v := task.Config["volumes"].([]string); len(v) != 1 || v[0] != "docker-data:/var/lib/docker" {
				fail("/var/lib/docker must be bound from the task dir: %v", v)
			}
			if task.Env[dispatch.EnvDinD] != "1" {
				fail("env %v", task.Env)
			}
			tok := task.Templates[1]
			if *tok.DestPath != "secrets/token" || *tok.ChangeMode != "noop" || *tok.Perms != "0400" ||
				*tok.EmbeddedTmpl != `{{ with nomadVar "nomad/jobs/`+wantID+`" }}{{ .token }}{{ end }}` {
				fail("token template %+v", tok)
			}
		}
		// What the runner alone may read is the runner's, mode 0400: the
		// agent's user (1000) cannot open it. Task mode has one identity,
		// the agent's, as its container runs as that user.
		owner := dispatch.RunnerUID
		if taskMode {
			owner = dispatch.AgentUID
			if task.User != "0:0" || task.Env[dispatch.EnvTaskFence] != "1000:1000" {
				fail("task mode's init must start as root and drop to the agent's user: user %q %s=%q",
					task.User, dispatch.EnvTaskFence, task.Env[dispatch.EnvTaskFence])
			}
		}
		for _, tp := range task.Templates {
			if strings.HasPrefix(*tp.DestPath, "secrets/env") || strings.HasPrefix(*tp.DestPath, "secrets/gateway") {
				continue
			}
			if *tp.Perms != "0400" || tp.Uid == nil || *tp.Uid != owner || tp.Gid == nil || *tp.Gid != owner {
				fail("%s must be uid %d's with mode 0400: perms %s uid %v gid %v", *tp.DestPath, owner, *tp.Perms, tp.Uid, tp.Gid)
			}
		}
		// The work order travels base64-encoded through base64Decode, so
		// "{{" in the issue text stays text.
		wo := task.Templates[0]
		m := regexp.MustCompile(`^\{\{ base64Decode "([A-Za-z0-9+/=]+)" \}\}$`).FindStringSubmatch(*wo.EmbeddedTmpl)
		if m == nil || *wo.DestPath != "local/work-order.json" {
			fail("work order template %q -> %s", *wo.EmbeddedTmpl, *wo.DestPath)
			continue
		}
		raw, _ := base64.StdEncoding.DecodeString(m[1])
		var order dispatch.WorkOrder
		if err := json.Unmarshal(raw, &order); err != nil {
			fail("work order: %v", err)
		}
		if order.OutputDir != "/alloc/data" || order.TaskID != s.Order.TaskID || order.Task.Body != s.Order.Task.Body {
			fail("work order %+v", order)
		}
		if (order.TokenFile == "/secrets/token") == taskMode {
			fail("token file %q in %s mode", order.TokenFile, s.Order.Mode)
		}
		if err := order.Validate(); err != nil {
			fail("%v", err)
		}
	}
}

// Sandboxes go to their own node pool unless the operator names another.
func TestSandboxNodePool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ set, want string }{{"", nomad.DefaultNodePool}, {"default", "default"}, {"gpu-sandbox", "gpu-sandbox"}} {
		job, err := nomad.BuildJob(nomad.Options{Image: testImage, NodePool: tc.set}, spec(dispatch.ModePlan, "pool"))
		if err != nil {
			t.Fatal(err)
		}
		if job.NodePool == nil || *job.NodePool != tc.want {
			t.Errorf("NodePool %q: job's node_pool %v, want %q", tc.set, job.NodePool, tc.want)
		}
	}
}

func TestBuildJobRejectsBadInput(t *testing.T) {
	t.Parallel()
	over := spec(dispatch.ModeExecute, "x")
	over.Order.Config.Resources.MemoryMB = 32768
	badIso := spec(dispatch.ModePlan, "y")
	badIso.Isolation = "rootless"
	noClone := spec(dispatch.ModePlan, "z")
	noClone.Order.CloneURL = ""
	for name, tc := range map[string]struct {
		opts nomad.Options
		spec dispatch.RunSpec
		want string
	}{
		"memory over ceiling": {goldenOptions(), over, "resources.memory_mb 32768 is over the server ceiling of 16384"},
		"unknown isolation":   {goldenOptions(), badIso, `isolation "rootless"`},
		"invalid work order":  {goldenOptions(), noClone, "clone_url is required"},
		"no image":            {nomad.Options{}, spec(dispatch.ModePlan, "w"), "Image"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := nomad.BuildJob(tc.opts, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestLockPath(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"acme/web#42":    "sandbox-bot/locks/acme/web~2342",
		"Acme/My.Repo#7": "sandbox-bot/locks/acme/my~2erepo~237",
		"o/r_x-y#1":      "sandbox-bot/locks/o/r_x-y~231",
		strings.Repeat("a", 39) + "/" + strings.Repeat("b.", 50) + "#1": "",
	} {
		got := nomad.LockPath(key)
		if want == "" {
			if !strings.HasPrefix(got, "sandbox-bot/locks/~h/") || len(got) > 128 {
				t.Errorf("LockPath(long) = %q, want a hashed path within 128 chars", got)
			}
			continue
		}
		if got != want {
			t.Errorf("LockPath(%q) = %q, want %q", key, got, want)
		}
		if !regexp.MustCompile(`^[a-zA-Z0-9-_~/]{1,128}$`).MatchString(got) {
			t.Errorf("LockPath(%q) = %q is not a valid Nomad variable path", key, got)
		}
	}
}
