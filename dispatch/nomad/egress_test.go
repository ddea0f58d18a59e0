package nomad_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
)

// Coding jobs tell the init what to fence off: the configured networks
// (the Nomad API, the bot) and the Nomad agent of the node the job lands
// on, which Nomad interpolates; task jobs, which cannot fence, get nothing.
func TestJobDeniesNomadAndTheBot(t *testing.T) {
	t.Parallel()
	o := goldenOptions()
	var err error
	o.DenyNets, err = dispatch.ParseDenyNets("10.0.0.5:4646,10.0.0.9:8080")
	if err != nil {
		t.Fatal(err)
	}
	job, err := nomad.BuildJob(o, spec(dispatch.ModeExecute, "1"))
	if err != nil {
		t.Fatal(err)
	}
	want := "10.0.0.5/32:4646,10.0.0.9/32:8080," + nomad.NodeAgentDenyNet
	if got := job.TaskGroups[0].Tasks[0].Env[dispatch.EnvDenyNets]; got != want {
		t.Errorf("%s = %q, want %q", dispatch.EnvDenyNets, got, want)
	}
	// Behind the host wall: the whole node, the init's own part asked
	// for, the operator's host ports excepted.
	o.HostWall = true
	if o.HostAllow, err = dispatch.ParseHostAllow("${attr.unique.network.ip-address}:3000,10.0.0.1:8443"); err != nil {
		t.Fatal(err)
	}
	walled, err := nomad.BuildJob(o, spec(dispatch.ModeExecute, "1"))
	if err != nil {
		t.Fatal(err)
	}
	env := walled.TaskGroups[0].Tasks[0].Env
	if got, want := env[dispatch.EnvDenyNets], "10.0.0.5/32:4646,10.0.0.9/32:8080,${attr.unique.network.ip-address}"; got != want {
		t.Errorf("behind the wall %s = %q, want %q", dispatch.EnvDenyNets, got, want)
	}
	if env[dispatch.EnvDenyHost] != "1" || env[dispatch.EnvAllowHosts] != "${attr.unique.network.ip-address}:3000,10.0.0.1:8443" {
		t.Errorf("behind the wall %s=%q %s=%q", dispatch.EnvDenyHost, env[dispatch.EnvDenyHost], dispatch.EnvAllowHosts, env[dispatch.EnvAllowHosts])
	}
	task, err := nomad.BuildJob(o, spec(dispatch.ModeTask, "1"))
	if err != nil {
		t.Fatal(err)
	}
	// Task mode is behind the same wall: its init fences as root before
	// it drops to the agent's user.
	tenv := task.TaskGroups[0].Tasks[0].Env
	for _, k := range []string{dispatch.EnvDenyNets, dispatch.EnvDenyHost, dispatch.EnvAllowHosts} {
		if tenv[k] != env[k] {
			t.Errorf("task job %s = %q, want the coding job's %q", k, tenv[k], env[k])
		}
	}
	if tenv[dispatch.EnvTaskFence] != "1000:1000" {
		t.Errorf("task job %s = %q, want the agent's 1000:1000", dispatch.EnvTaskFence, tenv[dispatch.EnvTaskFence])
	}
}
