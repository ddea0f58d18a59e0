package dockertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procStat is what the profiles read of /proc/<pid>/stat.
type procStat struct {
	comm string
	ppid int
	// own is the process's CPU time (utime and stime), children that of
	// its children it has waited for (cutime and cstime).
	own, children time.Duration
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	f := strings.Fields(s[closing+2:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var t [4]int64
	for i := range t {
		t[i], _ = strconv.ParseInt(f[11+i], 10, 64)
	}
	ppid, _ := strconv.Atoi(f[1])
	return procStat{comm: s[open+1 : closing], ppid: ppid, own: ticks(t[0] + t[1]), children: ticks(t[2] + t[3])}, nil
}

// ticks is n clock ticks (USER_HZ) as a duration.
func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / clockTick }

// cgroupUsage is a cgroup's CPU time from its cpuacct.usage file
// (nanoseconds), 0 when it cannot be read.
func cgroupUsage(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns)
}

// ProcessCPU is pid's own CPU time and that of the children it has
// waited for: for the bot, its own work and its docker CLI calls that
// ended.
func ProcessCPU(pid int) (own, children time.Duration, err error) {
	st, err := readStat(pid)
	return st.own, st.children, err
}

// EngineCPU is the CPU time of the host's Docker engine (dockerd and
// containerd, not the shims, which belong to containers). Every container
// on the engine shares it: on a machine where others use the engine, a
// difference of two readings counts their work too.
func EngineCPU() time.Duration {
	des, _ := os.ReadDir("/proc")
	var sum time.Duration
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && (st.comm == "dockerd" || st.comm == "containerd") {
			sum += st.own + st.children
		}
	}
	return sum
}

// LoadAverage is the one-minute load average, 0 when it cannot be read.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	load, _ := strconv.ParseFloat(f[0], 64)
	return load
}

// WatchChildren notes the commands pid starts (its children, seen every
// 20 ms: the bot's docker CLI calls last longer) until the returned
// function is called, which counts them by their first two words
// ("docker logs").
func WatchChildren(pid int) func() map[string]int {
	seen := map[int]string{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			des, _ := os.ReadDir("/proc")
			for _, de := range des {
				child, err := strconv.Atoi(de.Name())
				if err != nil || seen[child] != "" {
					continue
				}
				if st, err := readStat(child); err != nil || st.ppid != pid {
					continue
				}
				cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
				words := strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")
				name := filepath.Base(words[0])
				for _, w := range words[1:] {
					if !strings.HasPrefix(w, "-") {
						name += " " + w
						break
					}
				}
				seen[child] = name
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() map[string]int {
		close(stop)
		<-done
		n := map[string]int{}
		for _, name := range seen {
			n[name]++
		}
		return n
	}
}

// MachineCPU is what the whole machine has spent since boot: busy (every
// CPU state but idle and iowait) and idle (idle and iowait), summed over
// the cores, from /proc/stat; containers is what every container of the
// engine has spent (its cgroup parent's cpuacct.usage, cgroup v1 and the
// cgroupfs driver; 0 where that is not the layout). A difference of two
// readings says whether a burst kept the cores busy, and with what.
type MachineCPU struct{ Busy, Idle, Containers time.Duration }

// ReadMachineCPU reads MachineCPU now.
func ReadMachineCPU() MachineCPU {
	var m MachineCPU
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i, s := range f[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			d := ticks(n)
			switch i {
			case 3, 4: // idle, iowait
				m.Idle += d
			case 8, 9: // guest, guest_nice: already counted in user and nice
			default:
				m.Busy += d
			}
		}
	}
	m.Containers = cgroupUsage("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")
	return m
}

// Since is m minus an earlier reading.
func (m MachineCPU) Since(then MachineCPU) MachineCPU {
	return MachineCPU{Busy: m.Busy - then.Busy, Idle: m.Idle - then.Idle, Containers: m.Containers - then.Containers}
}

// String says it in CPU seconds, with the busy share of the cores.
func (m MachineCPU) String() string {
	return fmt.Sprintf("machine busy %.1f s of CPU (%.0f %% of the cores; containers %.1f s), idle %.1f s",
		m.Busy.Seconds(), 100*m.Busy.Seconds()/max(1e-9, m.Busy.Seconds()+m.Idle.Seconds()), m.Containers.Seconds(), m.Idle.Seconds())
}

// RunningContainers is how many containers of the engine have a cgroup
// now (cgroup v1 and the cgroupfs driver; 0 elsewhere).
func RunningContainers() int {
	des, _ := os.ReadDir("/sys/fs/cgroup/cpuacct/docker")
	n := 0
	for _, de := range des {
		if de.IsDir() {
			n++
		}
	}
	return n
}
