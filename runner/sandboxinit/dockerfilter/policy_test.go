package dockerfilter

import (
	"context"
	"encoding/json"

	"net/url"
	"strings"
	"testing"
)

// fakeBinds stages by name: /workspace/x becomes /stage/x.
type fakeBinds struct{}

func (fakeBinds) Stage(src string, create bool) (string, error) {
	rel, err := relInside("/workspace", src)
	if err != nil {
		return "", err
	}
	if strings.Contains(rel, "escape") {
		return "", refuse("bind source %s is refused: a symlink on its path leads out of the workspace /workspace", src)
	}
	return "/stage/" + rel, nil
}

func (fakeBinds) Known(src string) bool { return strings.HasPrefix(src, "/stage/") }

type fakeEngine struct {
	containers map[string]*Existing
	networks   map[string]string
}

func (e fakeEngine) Container(_ context.Context, id string) (*Existing, error) {
	c := e.containers[id]
	if c != nil && c.ID == "" {
		// The engine answers with the full id, whatever name it was asked.
		cp := *c
		cp.ID = "id-" + id
		c = &cp
	}
	return c, nil
}

// fakeOwned owns the containers the test's agent made.
type fakeOwned map[string]bool

func (o fakeOwned) Owns(id string) bool { return o[id] }

func (e fakeEngine) NetworkDriver(_ context.Context, name string) (string, error) {
	return e.networks[name], nil
}

func testPolicy() *Policy {
	return &Policy{
		Binds:  fakeBinds{},
		Socket: "/run/sandbox/docker.sock",
		Owned:  fakeOwned{"id-mine": true, "id-hostnet": true, "id-hostpid": true, "id-priv": true, "id-vector": true},
		Inspect: fakeEngine{
			containers: map[string]*Existing{
				"mine":     {HostConfig: object{"NetworkMode": "bridge", "Privileged": false, "CgroupnsMode": "host", "MaskedPaths": []any{"/proc/kcore"}}, Mounts: []MountPoint{{Type: "bind", Source: "/stage/repo"}, {Type: "volume", Source: "/var/lib/docker/volumes/x/_data"}}},
				"reaper":   {HostConfig: object{}, Mounts: []MountPoint{{Type: "bind", Source: "/run/sandbox/docker.sock"}}},
				"vector":   {HostConfig: object{}, Mounts: []MountPoint{{Type: "bind", Source: "/var/run/docker.sock"}}},
				"hostnet":  {HostConfig: object{"NetworkMode": "host"}},
				"hostpid":  {HostConfig: object{"PidMode": "host"}},
				"priv":     {HostConfig: object{"Privileged": true}},
				"capped":   {HostConfig: object{"CapAdd": []any{"SYS_ADMIN"}}},
				"seccomp0": {HostConfig: object{"SecurityOpt": []any{"seccomp=unconfined"}}},
				"db":       {HostConfig: object{"NetworkMode": "sandbox"}},
			},
			networks: map[string]string{"proj_default": "bridge", "f00dhostid": "host"},
		},
	}
}

func decideFor(p *Policy, method, path, body string) verdict {
	u, _ := url.Parse(path)
	return p.decide(context.Background(), request{
		method:  method,
		minor:   apiMinor(u.Path),
		version: versionOf(u.Path),
		hasBody: body != "",
		path:    splitPath(u.Path),
		query:   u.Query(),
		body:    func() ([]byte, error) { return []byte(body), nil },
	})
}

// The table: every host-level setting the agent could ask for, spelled as
// the docker CLI and compose send it, and the settings a project needs.
func TestPolicyTable(t *testing.T) {
	t.Parallel()
	create := "/v1.41/containers/create"
	cases := []struct {
		name, method, path, body string
		// want is "" for forwarded, else a substring of the refusal.
		want string
	}{
		// What a project needs.
		{"ping", "HEAD", "/_ping", "", ""},
		{"version unversioned", "GET", "/version", "", ""},
		{"plain run", "POST", create, `{"Image":"svc","HostConfig":{"NetworkMode":"default","LogConfig":{"Type":"","Config":{}},"PortBindings":{"8080/tcp":[{"HostIp":"","HostPort":"18080"}]},"RestartPolicy":{"Name":"no"},"AutoRemove":true,"CapDrop":["NET_RAW"],"Privileged":false,"PublishAllPorts":false,"ReadonlyRootfs":false,"SecurityOpt":null,"Tmpfs":{"/tmp":""},"Memory":0,"Init":null,"OomKillDisable":false,"Devices":[],"CgroupParent":"","Sysctls":null}}`, ""},
		{"unversioned create", "POST", "/containers/create?name=x", `{"Image":"svc"}`, ""},
		{"named volume bind", "POST", create, `{"Image":"svc","HostConfig":{"Binds":["data:/data:rw","/anon"]}}`, ""},
		{"workspace bind", "POST", create, `{"Image":"svc","HostConfig":{"Binds":["/workspace/repo:/src:ro"]}}`, ""},
		{"workspace mount", "POST", create, `{"Image":"svc","HostConfig":{"Mounts":[{"Type":"bind","Source":"/workspace/repo/web","Target":"/web","ReadOnly":true},{"Type":"volume","Source":"v","Target":"/v"},{"Type":"tmpfs","Target":"/t"}]}}`, ""},
		{"the filter's own socket", "POST", create, `{"Image":"ryuk","HostConfig":{"Binds":["/run/sandbox/docker.sock:/var/run/docker.sock"]}}`, ""},
		{"user network", "POST", create, `{"Image":"svc","HostConfig":{"NetworkMode":"proj_default"},"NetworkingConfig":{"EndpointsConfig":{"proj_default":{"Aliases":["web"]}}}}`, ""},
		{"another container's network", "POST", create, `{"Image":"svc","HostConfig":{"NetworkMode":"container:mine"}}`, ""},
		{"no-new-privileges", "POST", create, `{"Image":"svc","HostConfig":{"SecurityOpt":["no-new-privileges"]}}`, ""},
		{"start own container", "POST", "/v1.41/containers/mine/start", "", ""},
		{"attach own container", "POST", "/v1.41/containers/mine/attach?stream=1", "", ""},
		{"start the reaper", "POST", "/containers/reaper/start", "", ""},
		{"exec", "POST", "/v1.41/containers/mine/exec", `{"User":"root","Cmd":["sh"],"AttachStdout":true,"Privileged":false}`, ""},
		{"logs", "GET", "/v1.41/containers/vector/logs?follow=1", "", ""},
		{"volume", "POST", "/v1.41/volumes/create", `{"Name":"data","Driver":"local","DriverOpts":{},"Labels":{"com.docker.compose.project":"p"}}`, ""},
		{"tmpfs volume", "POST", "/v1.41/volumes/create", `{"Name":"t","DriverOpts":{"type":"tmpfs","device":"tmpfs","o":"size=100m,uid=1000"}}`, ""},
		{"network", "POST", "/v1.41/networks/create", `{"Name":"proj_default","Driver":"bridge","CheckDuplicate":true,"Options":{"com.docker.network.driver.mtu":"1400"},"IPAM":{"Driver":"default","Config":[]},"Labels":{}}`, ""},
		{"connect", "POST", "/v1.41/networks/proj_default/connect", `{"Container":"mine"}`, ""},
		{"build", "POST", "/v1.41/build?t=app&networkmode=default&rm=1", "", ""},
		{"pull", "POST", "/v1.41/images/create?fromImage=redis&tag=7", "", ""},
		{"image with slashes", "GET", "/v1.41/images/ghcr.io/acme/app:1/json", "", ""},
		{"buildkit session", "POST", "/session", "", ""},
		{"events", "GET", "/v1.41/events", "", ""},
		{"update memory", "POST", "/v1.41/containers/mine/update", `{"Memory":1073741824,"RestartPolicy":{"Name":"always"}}`, ""},
		{"copy out", "GET", "/v1.41/containers/vector/archive?path=/etc", "", ""},
		{"delete", "DELETE", "/v1.41/containers/mine?force=1", "", ""},

		// Host-level settings.
		{"privileged", "POST", create, `{"Image":"svc","HostConfig":{"Privileged":true}}`, "HostConfig.Privileged is refused"},
		{"privileged lower case", "POST", create, `{"Image":"svc","hostconfig":{"privileged":true}}`, "HostConfig.Privileged is refused"},
		{"privileged folded twice", "POST", create, `{"Image":"svc","HostConfig":{"Privileged":false,"privileged":true}}`, "twice"},
		{"security opt with long s", "POST", create, `{"Image":"svc","HostConfig":{"ſecurityOpt":["seccomp=unconfined"]}}`, "seccomp=unconfined"},
		{"bind /", "POST", create, `{"Image":"svc","HostConfig":{"Binds":["/:/host"]}}`, "bind source / is refused"},
		{"bind dotdot", "POST", create, `{"Image":"svc","HostConfig":{"Binds":["/workspace/../etc:/e"]}}`, "only paths inside the workspace"},
		{"bind workspace prefix", "POST", create, `{"Image":"svc","HostConfig":{"Binds":["/workspace2:/e"]}}`, "only paths inside the workspace"},
		{"bind symlink escape", "POST", create, `{"Image":"svc","HostConfig":{"Binds":["/workspace/escape:/e"]}}`, "symlink"},
		{"bind real socket", "POST", create, `{"Image":"svc","HostConfig":{"Binds":["/var/run/docker.sock:/var/run/docker.sock"]}}`, "/var/run/docker.sock is refused"},
		{"bind rshared", "POST", create, `{"Image":"svc","HostConfig":{"Binds":["/workspace/x:/x:rshared"]}}`, "rshared propagation"},
		{"mount bind /", "POST", create, `{"Image":"svc","HostConfig":{"Mounts":[{"Type":"bind","Source":"/","Target":"/host"}]}}`, "bind source / is refused"},
		{"mount npipe", "POST", create, `{"Image":"svc","HostConfig":{"Mounts":[{"Type":"npipe","Source":"x","Target":"/x"}]}}`, `Type "npipe" is refused`},
		{"mount volume with bind opts", "POST", create, `{"Image":"svc","HostConfig":{"Mounts":[{"Type":"volume","Target":"/x","VolumeOptions":{"DriverConfig":{"Name":"local","Options":{"type":"none","o":"bind","device":"/"}}}}]}}`, "type=none"},
		{"mount volume plugin", "POST", create, `{"Image":"svc","HostConfig":{"Mounts":[{"Type":"volume","Target":"/x","VolumeOptions":{"DriverConfig":{"Name":"sshfs"}}}]}}`, "only the local volume driver"},
		{"volume driver", "POST", create, `{"Image":"svc","HostConfig":{"VolumeDriver":"sshfs"}}`, "VolumeDriver"},
		{"pid host", "POST", create, `{"Image":"svc","HostConfig":{"PidMode":"host"}}`, "HostConfig.PidMode=host is refused"},
		{"ipc host", "POST", create, `{"Image":"svc","HostConfig":{"IpcMode":"host"}}`, "HostConfig.IpcMode=host"},
		{"network host", "POST", create, `{"Image":"svc","HostConfig":{"NetworkMode":"host"}}`, "HostConfig.NetworkMode=host is refused"},
		{"network host by id", "POST", create, `{"Image":"svc","HostConfig":{"NetworkMode":"f00dhostid"}}`, "that network is the host network"},
		{"endpoint host", "POST", create, `{"Image":"svc","NetworkingConfig":{"EndpointsConfig":{"host":{}}}}`, "EndpointsConfig=host"},
		{"network of a host container", "POST", create, `{"Image":"svc","HostConfig":{"NetworkMode":"container:hostnet"}}`, "uses the host's namespace"},
		{"pid of a host container", "POST", create, `{"Image":"svc","HostConfig":{"PidMode":"container:hostpid"}}`, "uses the host's namespace"},
		{"pid of the agent's own", "POST", create, `{"Image":"svc","HostConfig":{"PidMode":"container:mine","IpcMode":"container:mine","UTSMode":"container:mine"}}`, ""},
		{"pid of a service", "POST", create, `{"Image":"svc","HostConfig":{"PidMode":"container:db"}}`, "HostConfig.PidMode=container:db is refused: the agent did not create that container"},
		{"ipc of a service", "POST", create, `{"Image":"svc","HostConfig":{"IpcMode":"container:db"}}`, "HostConfig.IpcMode=container:db is refused: the agent did not create"},
		{"network of a service", "POST", create, `{"Image":"svc","HostConfig":{"NetworkMode":"container:db"}}`, "HostConfig.NetworkMode=container:db is refused: the agent did not create"},
		{"uts of a service", "POST", create, `{"Image":"svc","HostConfig":{"UTSMode":"container:db"}}`, "HostConfig.UTSMode=container:db is refused: the agent did not create"},
		{"pid of the socket holder", "POST", create, `{"Image":"svc","HostConfig":{"PidMode":"container:reaper"}}`, "the agent did not create"},
		{"pid of an owned privileged one", "POST", create, `{"Image":"svc","HostConfig":{"PidMode":"container:priv"}}`, "is privileged"},
		{"pid of an owned socket holder", "POST", create, `{"Image":"svc","HostConfig":{"PidMode":"container:vector"}}`, "mounts /var/run/docker.sock"},
		{"pid of nothing", "POST", create, `{"Image":"svc","HostConfig":{"PidMode":"container:nosuch"}}`, "there is no container nosuch"},
		{"ipv6 network", "POST", "/v1.41/networks/create", `{"Name":"v6","EnableIPv6":true,"IPAM":{"Config":[{"Subnet":"fd00:dead::/64"}]}}`, "network EnableIPv6 is refused"},
		{"ipv6 subnet only", "POST", "/v1.41/networks/create", `{"Name":"v6","IPAM":{"Config":[{"Subnet":"172.30.0.0/16"},{"Subnet":"fd00:dead::/64"}]}}`, `IPAM.Config Subnet "fd00:dead::/64" is refused`},
		{"ipv4 subnet", "POST", "/v1.41/networks/create", `{"Name":"v4","EnableIPv6":false,"IPAM":{"Config":[{"Subnet":"172.30.0.0/16","Gateway":"172.30.0.1"}]}}`, ""},
		{"uts host", "POST", create, `{"Image":"svc","HostConfig":{"UTSMode":"host"}}`, "HostConfig.UTSMode=host"},
		{"userns host", "POST", create, `{"Image":"svc","HostConfig":{"UsernsMode":"host"}}`, "HostConfig.UsernsMode=host"},
		{"cgroupns host", "POST", create, `{"Image":"svc","HostConfig":{"CgroupnsMode":"host"}}`, "HostConfig.CgroupnsMode=host"},
		{"cap add", "POST", create, `{"Image":"svc","HostConfig":{"CapAdd":["SYS_ADMIN"]}}`, "HostConfig.CapAdd is refused"},
		{"device", "POST", create, `{"Image":"svc","HostConfig":{"Devices":[{"PathOnHost":"/dev/kmsg","PathInContainer":"/dev/kmsg","CgroupPermissions":"rwm"}]}}`, "HostConfig.Devices is refused"},
		{"device request", "POST", create, `{"Image":"svc","HostConfig":{"DeviceRequests":[{"Count":-1,"Capabilities":[["gpu"]]}]}}`, "HostConfig.DeviceRequests"},
		{"device cgroup rule", "POST", create, `{"Image":"svc","HostConfig":{"DeviceCgroupRules":["c 1:3 mr"]}}`, "HostConfig.DeviceCgroupRules"},
		{"seccomp unconfined", "POST", create, `{"Image":"svc","HostConfig":{"SecurityOpt":["seccomp=unconfined"]}}`, `"seccomp=unconfined" is refused`},
		{"seccomp profile", "POST", create, `{"Image":"svc","HostConfig":{"SecurityOpt":["seccomp={\"defaultAction\":\"SCMP_ACT_ALLOW\"}"]}}`, "seccomp="},
		{"apparmor", "POST", create, `{"Image":"svc","HostConfig":{"SecurityOpt":["apparmor:unconfined"]}}`, "apparmor:unconfined"},
		{"label disable", "POST", create, `{"Image":"svc","HostConfig":{"SecurityOpt":["label=disable"]}}`, "label=disable"},
		{"systempaths", "POST", create, `{"Image":"svc","HostConfig":{"SecurityOpt":["systempaths=unconfined"],"MaskedPaths":[],"ReadonlyPaths":[]}}`, "refused"},
		{"masked paths", "POST", create, `{"Image":"svc","HostConfig":{"MaskedPaths":[]}}`, "HostConfig.MaskedPaths is refused"},
		{"sysctl", "POST", create, `{"Image":"svc","HostConfig":{"Sysctls":{"kernel.domainname":"x"}}}`, "HostConfig.Sysctls is refused"},
		{"cgroup parent", "POST", create, `{"Image":"svc","HostConfig":{"CgroupParent":"/"}}`, "HostConfig.CgroupParent is refused"},
		{"runtime", "POST", create, `{"Image":"svc","HostConfig":{"Runtime":"runsc-unconfined"}}`, "HostConfig.Runtime"},
		{"log driver", "POST", create, `{"Image":"svc","HostConfig":{"LogConfig":{"Type":"syslog","Config":{"syslog-address":"unix:///var/run/docker.sock"}}}}`, "LogConfig.Type"},
		{"oom score", "POST", create, `{"Image":"svc","HostConfig":{"OomScoreAdj":-1000}}`, "OomScoreAdj"},
		{"unknown host config field", "POST", create, `{"Image":"svc","HostConfig":{"FutureHostThing":{"x":1}}}`, "does not know this setting"},
		{"unknown zero field passes", "POST", create, `{"Image":"svc","HostConfig":{"FutureHostThing":null}}`, ""},
		{"volumes from the real socket holder", "POST", create, `{"Image":"svc","HostConfig":{"VolumesFrom":["vector:ro"]}}`, "mounts /var/run/docker.sock"},
		{"trailing body", "POST", create, `{"Image":"svc"} {"HostConfig":{"Privileged":true}}`, "after its JSON value"},
		{"privileged exec", "POST", "/v1.41/containers/mine/exec", `{"Cmd":["sh"],"Privileged":true}`, "exec Privileged is refused"},
		{"exec into the real socket holder", "POST", "/v1.41/containers/vector/exec", `{"Cmd":["sh"]}`, "exec in container vector is refused"},
		{"exec into privileged", "POST", "/v1.41/containers/priv/exec", `{"Cmd":["sh"]}`, "is privileged"},
		{"start privileged", "POST", "/v1.41/containers/priv/start", "", "is privileged"},
		{"start cap added", "POST", "/v1.41/containers/capped/start", "", "has CapAdd"},
		{"attach unconfined", "POST", "/v1.41/containers/seccomp0/attach", "", "security-opt"},
		{"copy into the real socket holder", "PUT", "/v1.41/containers/vector/archive?path=/", "", "archive container vector is refused"},
		{"update devices", "POST", "/v1.41/containers/mine/update", `{"Devices":[{"PathOnHost":"/dev/sda"}]}`, "update Devices is refused"},
		{"update cgroup parent", "POST", "/v1.41/containers/mine/update", `{"CgroupParent":"/"}`, "update CgroupParent"},
		{"volume bind", "POST", "/v1.41/volumes/create", `{"Name":"root","Driver":"local","DriverOpts":{"type":"none","o":"bind","device":"/"}}`, "DriverOpts type=none is refused"},
		{"volume device", "POST", "/v1.41/volumes/create", `{"Name":"disk","DriverOpts":{"type":"ext4","device":"/dev/sda1"}}`, "refused"},
		{"volume tmpfs bind opt", "POST", "/v1.41/volumes/create", `{"DriverOpts":{"type":"tmpfs","o":"bind"}}`, `mount option "bind"`},
		{"volume plugin", "POST", "/v1.41/volumes/create", `{"Name":"x","Driver":"rexray"}`, "only the local volume driver"},
		{"macvlan", "POST", "/v1.41/networks/create", `{"Name":"m","Driver":"macvlan","Options":{"parent":"eth0"}}`, `Driver "macvlan" is refused`},
		{"bridge on eth0", "POST", "/v1.41/networks/create", `{"Name":"b","Options":{"com.docker.network.bridge.name":"eth0"}}`, "com.docker.network.bridge.name"},
		{"connect host", "POST", "/v1.41/networks/host/connect", `{"Container":"mine"}`, "network=host is refused"},
		{"build network host", "POST", "/v1.41/build?t=x&networkmode=host", "", "docker build --network=host is refused"},
		{"build cgroup parent", "POST", "/build?cgroupparent=/", "", "--cgroup-parent is refused"},
		{"raw buildkit", "POST", "/grpc", "", "/grpc"},
		{"plugin install", "POST", "/v1.41/plugins/pull?remote=x", "", "plugins are refused"},
		{"swarm init", "POST", "/v1.41/swarm/init", `{}`, "swarm mode (/swarm) is refused"},
		{"service create", "POST", "/v1.41/services/create", `{}`, "swarm mode"},
		{"top-level host config", "POST", create, `{"Image":"svc","Privileged":true}`, "Privileged at the top level"},
		{"top-level host config folded", "POST", create, `{"Image":"svc","capadd":["ALL"]}`, "capadd at the top level"},
		{"start with a host config", "POST", "/v1.41/containers/mine/start", `{"Privileged":true}`, "a body on POST /containers/mine/start is refused"},
		{"old API", "POST", "/v1.23/containers/mine/start", "", "API version 1.23 is refused"},
		{"import from a URL", "POST", "/v1.41/images/create?fromSrc=http://example.test/x.tar&repo=x", "", "docker import from a URL is refused"},
		{"import from stdin", "POST", "/v1.41/images/create?fromSrc=-&repo=x", "", ""},
		{"buildkit build", "POST", "/v1.41/build?remote=client-session&session=abc&version=2&t=x", "", ""},
		{"remote build context", "POST", "/v1.41/build?remote=https://example.test/x.git", "", "remote context"},
		{"unknown endpoint", "POST", "/v1.41/containers/mine/checkpoints", "", "does not forward this endpoint"},
	}
	p := testPolicy()
	for _, c := range cases {
		v := decideFor(p, c.method, c.path, c.body)
		switch {
		case c.want == "" && v.err != nil:
			t.Errorf("%s: refused: %v", c.name, v.err)
		case c.want != "" && v.err == nil:
			t.Errorf("%s: forwarded, want a refusal with %q", c.name, c.want)
		case c.want != "" && !strings.Contains(v.err.Error(), c.want):
			t.Errorf("%s: refusal %q lacks %q", c.name, v.err, c.want)
		case c.want != "" && !strings.HasPrefix(v.err.Error(), "sandbox docker filter: ") && !strings.Contains(v.err.Error(), "twice") && !strings.Contains(v.err.Error(), "JSON"):
			t.Errorf("%s: refusal %q does not say who refused", c.name, v.err)
		}
	}
}

// Bind sources reach the engine as the staged paths, never as given.
func TestCreateRewritesBindSources(t *testing.T) {
	t.Parallel()
	v := decideFor(testPolicy(), "POST", "/containers/create", `{"Image":"svc","HostConfig":{"Binds":["/workspace/repo/../repo/web:/web:ro","data:/data"],"Mounts":[{"Type":"bind","Source":"/workspace/cfg.yml","Target":"/cfg.yml"}]}}`)
	if v.err != nil {
		t.Fatal(v.err)
	}
	var got struct {
		HostConfig struct {
			Binds  []string
			Mounts []struct{ Source string }
		}
	}
	if err := json.Unmarshal(v.body, &got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/stage/repo/web:/web:ro", "data:/data"}; strings.Join(got.HostConfig.Binds, " ") != strings.Join(want, " ") {
		t.Errorf("Binds = %q, want %q", got.HostConfig.Binds, want)
	}
	if len(got.HostConfig.Mounts) != 1 || got.HostConfig.Mounts[0].Source != "/stage/cfg.yml" {
		t.Errorf("Mounts = %+v", got.HostConfig.Mounts)
	}
}

func TestSplitPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/v1.41/containers/create": "containers create",
		"/v1/containers/json":      "containers json",
		"/containers/x/start":      "containers x start",
		"/version":                 "version",
		"/v1.41/version":           "version",
	} {
		if m := apiMinor(in); strings.HasPrefix(in, "/v1.41/") && m != 41 || !strings.HasPrefix(in, "/v") && m != -1 {
			t.Errorf("apiMinor(%q) = %d", in, m)
		}
		if got := strings.Join(splitPath(in), " "); got != want {
			t.Errorf("splitPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// What the filter checked by name is what the engine acts on: a join, the
// containers whose volumes are taken, a network connection and the
// container a start, exec, attach, copy or rename acts on reach the engine
// as the full id the filter inspected, never as the name again (the agent
// could rename containers between the check and the engine's look-up).
// Renaming or connecting a container the agent did not create is refused.
func TestFilterPinsWhatItChecked(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	create := func(body string) map[string]any {
		t.Helper()
		v := decideFor(p, "POST", "/v1.41/containers/create", body)
		if v.err != nil {
			t.Fatalf("%s: %v", body, v.err)
		}
		var got struct{ HostConfig map[string]any }
		if err := json.Unmarshal(v.body, &got); err != nil {
			t.Fatal(err)
		}
		return got.HostConfig
	}
	hc := create(`{"Image":"svc","HostConfig":{"NetworkMode":"container:mine","PidMode":"Container:mine","IpcMode":"container:mine","UTSMode":"container:mine","VolumesFrom":["mine:ro","reaper"]}}`)
	for _, mode := range []string{"NetworkMode", "PidMode", "IpcMode", "UTSMode"} {
		if hc[mode] != "container:id-mine" {
			t.Errorf("%s reaches the engine as %v, want container:id-mine", mode, hc[mode])
		}
	}
	if vf, _ := json.Marshal(hc["VolumesFrom"]); string(vf) != `["id-mine:ro","id-reaper"]` {
		t.Errorf("VolumesFrom reaches the engine as %s", vf)
	}
	if hc := create(`{"Image":"svc","HostConfig":{"NetworkMode":"proj_default","IpcMode":"shareable"}}`); hc["NetworkMode"] != "proj_default" || hc["IpcMode"] != "shareable" {
		t.Errorf("modes without a container were rewritten: %v", hc)
	}
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/v1.41/containers/mine/start", "", "/v1.41/containers/id-mine/start"},
		{"POST", "/containers/mine/restart?t=1", "", "/containers/id-mine/restart"},
		{"POST", "/v1.41/containers/mine/attach?stream=1", "", "/v1.41/containers/id-mine/attach"},
		{"GET", "/v1.41/containers/mine/attach/ws", "", "/v1.41/containers/id-mine/attach/ws"},
		{"PUT", "/v1.41/containers/mine/archive?path=/", "", "/v1.41/containers/id-mine/archive"},
		{"POST", "/v1.41/containers/mine/exec", `{"Cmd":["sh"]}`, "/v1.41/containers/id-mine/exec"},
		{"POST", "/v1.41/containers/db/exec", `{"Cmd":["sh"]}`, "/v1.41/containers/id-db/exec"},
		{"POST", "/v1.41/containers/mine/rename?name=x", "", "/v1.41/containers/id-mine/rename"},
	} {
		v := decideFor(p, tc.method, tc.path, tc.body)
		if v.err != nil || v.path != tc.want {
			t.Errorf("%s %s: forwarded to %q (%v), want %q", tc.method, tc.path, v.path, v.err, tc.want)
		}
	}
	v := decideFor(p, "POST", "/v1.41/networks/proj_default/connect", `{"container":"mine","EndpointConfig":{"Aliases":["web"]}}`)
	if v.err != nil || !strings.Contains(string(v.body), `"container":"id-mine"`) {
		t.Errorf("connect: %s (%v)", v.body, v.err)
	}
	for _, tc := range []struct{ name, method, path, body, want string }{
		{"rename a service", "POST", "/v1.41/containers/db/rename?name=x", "", "renaming container db is refused: the agent did not create it"},
		{"connect a service", "POST", "/v1.41/networks/proj_default/connect", `{"Container":"db"}`, "connecting or disconnecting container db is refused"},
		{"disconnect a service", "POST", "/v1.41/networks/sandbox/disconnect", `{"Container":"db","Force":true}`, "connecting or disconnecting container db is refused"},
		{"start nothing", "POST", "/v1.41/containers/nosuch/start", "", "No such container: nosuch"},
		{"rename nothing", "POST", "/v1.41/containers/nosuch/rename?name=x", "", "No such container: nosuch"},
		{"volumes of nothing", "POST", "/v1.41/containers/create", `{"Image":"svc","HostConfig":{"VolumesFrom":["nosuch"]}}`, "No such container: nosuch"},
	} {
		v := decideFor(p, tc.method, tc.path, tc.body)
		if v.err == nil || !strings.Contains(v.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, v.err, tc.want)
		}
	}
}
