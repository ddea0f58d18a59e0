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
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTick }
	return procStat{comm: s[open+1 : closing], ppid: ppid, own: tick(t[0] + t[1]), children: tick(t[2] + t[3])}, nil
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
