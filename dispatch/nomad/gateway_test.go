package nomad_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

const gatewayKey = "sk-ant-canary-nomad-0123456789"

func gatewayConfig() *dispatch.GatewayConfig {
	return &dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{
		{Name: "anthropic", BaseURL: "https://api.anthropic.com", API: dispatch.APIAnthropic, Key: gatewayKey},
	}}
}

func withGateway(o *nomad.Options) { o.Gateway = gatewayConfig() }

// The provider keys are rendered only into secrets/gateway/, root-owned
// 0400 (the sandbox user's in task mode, whose container runs as it), and
// never into the task's environment; job_test.go's golden files pin the
// whole job.
func TestBuildJobGatewayTemplate(t *testing.T) {
	for _, tc := range []struct {
		mode dispatch.Mode
		uid  int
	}{{dispatch.ModeExecute, 0}, {dispatch.ModeTask, dispatch.AgentUID}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			o := goldenOptions()
			withGateway(&o)
			job, err := nomad.BuildJob(o, spec(tc.mode, "7"))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(job); strings.Contains(string(got), gatewayKey) {
				t.Fatal("the provider key is in the job")
			}
			task := job.TaskGroups[0].Tasks[0]
			var gw *struct{ uid, gid int }
			for _, tmpl := range task.Templates {
				if *tmpl.DestPath != "secrets/gateway/providers.json" {
					if tmpl.Envvars != nil && *tmpl.Envvars && strings.Contains(*tmpl.EmbeddedTmpl, nomad.GatewayItem) {
						t.Error("the gateway item is rendered into the environment")
					}
					continue
				}
				if *tmpl.Perms != "0400" || tmpl.Envvars != nil && *tmpl.Envvars || !strings.Contains(*tmpl.EmbeddedTmpl, "."+nomad.GatewayItem) {
					t.Errorf("gateway template %+v", tmpl)
				}
				gw = &struct{ uid, gid int }{*tmpl.Uid, *tmpl.Gid}
			}
			if gw == nil || gw.uid != tc.uid || gw.gid != tc.uid {
				t.Fatalf("gateway template owner = %+v, want uid %d", gw, tc.uid)
			}
			m := regexp.MustCompile(`base64Decode "([A-Za-z0-9+/=]+)"`).FindStringSubmatch(*task.Templates[0].EmbeddedTmpl)
			if m == nil {
				t.Fatal("no work order template first")
			}
			raw, _ := base64.StdEncoding.DecodeString(m[1])
			var order dispatch.WorkOrder
			if err := json.Unmarshal(raw, &order); err != nil || order.GatewayFile != nomad.GatewayPath {
				t.Errorf("work order gateway_file = %q, %v; want %s", order.GatewayFile, err, nomad.GatewayPath)
			}
		})
	}
}

// The reference job carries the gateway template as BuildJob makes it.
func TestReferenceJobHasTheGatewayTemplate(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nomad", "sandbox.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	hcl := strings.Join(strings.Fields(string(raw)), " ")
	o := nomad.Options{Image: testImage, Gateway: gatewayConfig()}
	job, err := nomad.BuildJob(o, spec(dispatch.ModeExecute, "ref"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := job.TaskGroups[0].Tasks[0].Templates[2]
	for _, w := range []string{
		`data = "{{ with nomadVar \"nomad/jobs/sandbox-${lower(var.task_id)}-${var.mode}\" }}{{ .` + nomad.GatewayItem + ` }}{{ end }}"`,
		fmt.Sprintf(`destination = "%s" change_mode = "%s" perms = "%s" uid = %d gid = %d`, *tmpl.DestPath, *tmpl.ChangeMode, *tmpl.Perms, *tmpl.Uid, *tmpl.Gid),
	} {
		if !strings.Contains(hcl, w) {
			t.Errorf("deploy/nomad/sandbox.nomad.hcl lacks %s", w)
		}
	}
}

// Submit and refresh keep the providers file in the run's Variable; the
// sandbox environment item list has no provider key.
func TestGatewayTravelsInTheVariable(t *testing.T) {
	e := newEnv(t, nomadtest.Options{})
	b := e.backend(func(o *nomad.Options) { o.Gateway = gatewayConfig() })
	s := spec(dispatch.ModeExecute, "gw")
	if _, err := b.Submit(ctxT(t), s); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		v := e.fake.Var(nomad.DefaultNamespace, nomad.TokenVarPath(jobIDOf(s)))
		if v == nil {
			t.Fatalf("%s: no variable", when)
		}
		cfg, err := dispatch.ParseGatewayConfig([]byte(v.Items[nomad.GatewayItem]))
		if err != nil || len(cfg.Providers) != 1 || cfg.Providers[0].Key != gatewayKey {
			t.Fatalf("%s: gateway item = %q, %v", when, v.Items[nomad.GatewayItem], err)
		}
		for k := range v.Items {
			if strings.HasPrefix(k, nomad.EnvItemPrefix) {
				t.Errorf("%s: environment item %s", when, k)
			}
		}
	}
	check("submit")
	if err := b.RefreshToken(ctxT(t), s.Order.TaskID, "ghs_refreshed"); err != nil {
		t.Fatal(err)
	}
	check("refresh")
}
