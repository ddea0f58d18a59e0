package dockertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// CPUProfile samples the CPU time of every process of a running container
// (the container's init and all its descendants, inner containers
// included) from the host's /proc, every 50 ms, keeping each process's
// last reading. A process that lives less than a sample is missed; Report
// puts what the container's cgroup counted beyond the samples under
// "unsampled (short-lived)". The container's shim on the host (the
// init's parent, outside the container's cgroup) is sampled too and
// reported apart.
type CPUProfile struct {
	find      func(ctx context.Context) (string, error) // the container's name or id
	root      int
	shim      int
	cgroupCPU string
	every     time.Duration
	stop      chan struct{}
	done      chan struct{}

	mu    sync.Mutex
	procs map[int]procCPU
	shimT time.Duration
	total time.Duration // the cgroup's count at the last sample
}

type procCPU struct {
	comm, cmdline string
	cpu           time.Duration
	// children is the whole CPU time of the children it has reaped.
	children time.Duration
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux this runs on).
const clockTick = 100

// ProfileContainer starts sampling container once it runs; Report stops.
func ProfileContainer(t testing.TB, container string) *CPUProfile {
	t.Helper()
	return profile(func(context.Context) (string, error) { return container, nil })
}

// ProfileNextContainer samples the first container that `docker ps` lists
// with filters (`label=…`, `name=…`) once there is one: a run the bot
// starts, whose name the test does not know beforehand.
func ProfileNextContainer(t testing.TB, filters ...string) *CPUProfile {
	t.Helper()
	args := []string{"ps", "--quiet", "--no-trunc"}
	for _, f := range filters {
		args = append(args, "--filter", f)
	}
	return profile(func(ctx context.Context) (string, error) {
		out, err := exec.CommandContext(ctx, "docker", args...).Output()
		if f := strings.Fields(string(out)); err == nil && len(f) > 0 {
			return f[0], nil
		}
		return "", fmt.Errorf("no container yet: %v", err)
	})
}

func profile(find func(context.Context) (string, error)) *CPUProfile {
	p := &CPUProfile{find: find, stop: make(chan struct{}), done: make(chan struct{}), procs: map[int]procCPU{}, every: sampleEvery()}
	go p.loop()
	return p
}

// sampleEvery is 50 ms, or SANDBOX_CPUPROFILE_EVERY (a duration): a
// shorter one sees more of the short-lived processes and costs more CPU
// of its own, which is the test's, not the container's.
func sampleEvery() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SANDBOX_CPUPROFILE_EVERY")); err == nil && d > 0 {
		return d
	}
	return 50 * time.Millisecond
}

func (p *CPUProfile) loop() {
	defer close(p.done)
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		if p.root == 0 {
			p.attach()
		} else {
			p.sample()
		}
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
	}
}

// attach finds the container's init and its cgroup's CPU accounting.
func (p *CPUProfile) attach() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	container, err := p.find(ctx)
	if err != nil {
		return
	}
	out, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.Pid}} {{.Id}}", container).Output()
	if err != nil {
		return
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return
	}
	pid, _ := strconv.Atoi(f[0])
	if pid <= 0 {
		return
	}
	for _, dir := range []string{"/sys/fs/cgroup/cpuacct/docker/" + f[1], "/sys/fs/cgroup/cpu,cpuacct/docker/" + f[1]} {
		if _, err := os.Stat(filepath.Join(dir, "cpuacct.usage")); err == nil {
			p.cgroupCPU = filepath.Join(dir, "cpuacct.usage")
		}
	}
	p.root = pid
	if st, err := readStat(pid); err == nil {
		p.shim = st.ppid
	}
}

// sample reads every descendant of the container's init.
func (p *CPUProfile) sample() {
	des, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	parent := map[int]int{}
	stats := map[int]procCPU{}
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		parent[pid] = st.ppid
		stats[pid] = procCPU{comm: st.comm, cpu: st.own, children: st.children}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Its own time only: the container's processes it reaps are the
	// cgroup's.
	if st, err := readStat(p.shim); p.shim > 1 && err == nil && strings.HasPrefix(st.comm, "containerd-shim") {
		p.shimT = max(p.shimT, st.own)
	}
	if p.cgroupCPU != "" {
		p.total = max(p.total, cgroupUsage(p.cgroupCPU))
	}
	for pid, st := range stats {
		if !descends(pid, p.root, parent) {
			continue
		}
		prev, seen := p.procs[pid]
		if !seen {
			cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			st.cmdline = strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))
		} else {
			st.cmdline = prev.cmdline
			if st.cmdline == "" || prev.comm != st.comm {
				// An exec since the last sample (sh -c exec …).
				cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				st.cmdline = strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))
			}
		}
		p.procs[pid] = st
	}
}

func descends(pid, root int, parent map[int]int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		if pid == root {
			return true
		}
		pid = parent[pid]
	}
	return pid == root
}

// CPUReport is CPU time by part of the sandbox.
type CPUReport struct {
	// Total is the container cgroup's own count (0 when it could not be
	// read); Parts are the sampled processes by part.
	Total time.Duration
	Parts map[string]time.Duration
	// Seen counts the processes sampled in each part.
	Seen map[string]int
	// Reaped is, by part, the whole CPU time of the children its
	// processes waited for, short-lived ones included: what the runner's
	// git commands or the agent's tools cost, which the samples of those
	// processes catch only in part. It overlaps Parts.
	Reaped map[string]time.Duration
	// Shim is the container's containerd shim on the host, outside its
	// cgroup.
	Shim time.Duration
}

// Report stops sampling and sums the processes by part; the cgroup's total
// is its last reading while the container ran.
func (p *CPUProfile) Report() CPUReport {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	total := p.total
	r := CPUReport{Total: total, Parts: map[string]time.Duration{}, Seen: map[string]int{}, Reaped: map[string]time.Duration{}, Shim: p.shimT}
	var sampled time.Duration
	// Behind gVisor the container's init is gVisor's kernel (the sentry),
	// and its children are systrap's stubs, where the sandbox's own
	// processes run: the host sees no more of them.
	gvisor := strings.HasPrefix(p.procs[p.root].cmdline, "runsc-sandbox")
	for pid, st := range p.procs {
		d := st.cpu
		name := part(pid == p.root, st)
		switch {
		case gvisor && pid == p.root:
			name = "gVisor's kernel (runsc-sandbox)"
		case gvisor:
			name = "gVisor's stubs (the sandbox's processes)"
		}
		r.Parts[name] += d
		r.Seen[name]++
		if pid != p.root && st.children > 0 {
			r.Reaped[name] += st.children
		}
		sampled += d
	}
	if total > sampled {
		r.Parts["unsampled (short-lived)"] = total - sampled
		if gvisor {
			// Its file server (runsc-gofer) is in the cgroup, not under
			// the sentry.
			r.Parts["unsampled (short-lived, gVisor's gofer)"] = r.Parts["unsampled (short-lived)"]
			delete(r.Parts, "unsampled (short-lived)")
		}
	}
	return r
}

// part names what a process is in the sandbox.
func part(root bool, st procCPU) string {
	cmd := st.cmdline
	switch {
	case root:
		return "PID 1 (reaper, signal forwarding)"
	case strings.Contains(cmd, "sandbox-runner init"):
		return "init (docker filter, egress proxy, model gateway)"
	case strings.Contains(cmd, "sandbox-runner run"):
		return "runner"
	case strings.Contains(cmd, "sandbox-runner opencode-session"):
		return "session copy (sandbox-runner opencode-session)"
	case strings.Contains(cmd, "opencode") && (strings.Contains(cmd, " export") || strings.Contains(cmd, " import")):
		return "opencode export/import (session, before issue 33)"
	case st.comm == "opencode" || strings.Contains(cmd, "opencode"):
		return "opencode (agent)"
	case st.comm == "claude" || strings.Contains(cmd, "claude"):
		return "claude (agent)"
	case st.comm == "dockerd" || st.comm == "containerd" || strings.HasPrefix(st.comm, "containerd-") || st.comm == "runc" || st.comm == "docker-proxy" || st.comm == "docker-init":
		return "inner dockerd/containerd"
	case strings.HasPrefix(st.comm, "git"):
		return "git"
	case st.comm == "tar":
		return "tar (setup cache)"
	case st.comm == "node" || st.comm == "npm" || strings.Contains(cmd, "npm"):
		return "node/npm (setup)"
	case strings.Contains(st.comm, "chrom") || st.comm == "ffmpeg":
		return "chromium/ffmpeg (media)"
	case st.comm == "iptables" || strings.HasPrefix(st.comm, "iptables") || strings.HasPrefix(st.comm, "xtables") || strings.HasPrefix(st.comm, "ip6tables"):
		return "iptables"
	}
	return "other (" + st.comm + ")"
}

func seen(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// Table prints the report, largest first, with each part's share.
func (r CPUReport) Table() string {
	type row struct {
		name string
		d    time.Duration
	}
	var rows []row
	var sum time.Duration
	for n, d := range r.Parts {
		rows = append(rows, row{n, d})
		sum += d
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].d > rows[j].d })
	var b strings.Builder
	fmt.Fprintf(&b, "%-58s %9s %6s %9s\n", "part", "cpu", "share", "processes")
	for _, rw := range rows {
		fmt.Fprintf(&b, "%-58s %8.2fs %5.1f%% %9s\n", rw.name, rw.d.Seconds(), 100*rw.d.Seconds()/max(sum.Seconds(), 1e-9), seen(r.Seen[rw.name]))
	}
	fmt.Fprintf(&b, "%-58s %8.2fs (cgroup: %.2fs)\n", "total", sum.Seconds(), r.Total.Seconds())
	fmt.Fprintf(&b, "%-58s %8.2fs\n", "host: the container's containerd shim", r.Shim.Seconds())
	var reaped []string
	for n := range r.Reaped {
		reaped = append(reaped, n)
	}
	sort.Strings(reaped)
	for _, n := range reaped {
		fmt.Fprintf(&b, "%-58s %8.2fs\n", "children reaped by "+n+" (whole, in the above)", r.Reaped[n].Seconds())
	}
	return b.String()
}
