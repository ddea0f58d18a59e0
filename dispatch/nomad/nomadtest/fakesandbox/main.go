// Command fakesandbox stands in for the sandbox image's entrypoint in tests
// of the Nomad job on a real Docker engine (nomadtest.DockerDriver). It
// keeps the sandbox's contract and nothing else: it reads the work order
// from $SANDBOX_WORK_ORDER and the token file the job's template rendered,
// proves /var/lib/docker is the bind from the task directory, prints
// progress lines on stdout, and writes result.json into the output
// directory; on SIGTERM it writes an interrupted receipt, as the runner
// does. A task body containing "hold" keeps it running until SIGTERM.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func main() {
	os.Exit(run())
}

func run() int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fence, err := taskFence()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakesandbox:", err)
		return 2
	}
	raw, err := os.ReadFile(os.Getenv(dispatch.EnvWorkOrder))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakesandbox:", err)
		return 2
	}
	var order dispatch.WorkOrder
	if err := json.Unmarshal(raw, &order); err != nil {
		fmt.Fprintln(os.Stderr, "fakesandbox: work order:", err)
		return 2
	}
	if err := order.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "fakesandbox:", err)
		return 2
	}
	summary := []string{"dind=" + os.Getenv(dispatch.EnvDinD), "isolation=" + os.Getenv(dispatch.EnvIsolation)}
	if fence != "" {
		summary = append(summary, fence)
	}
	if order.TokenFile != "" {
		tok, err := os.ReadFile(order.TokenFile)
		if err != nil || len(tok) == 0 {
			fmt.Fprintln(os.Stderr, "fakesandbox: token file:", err)
			return 3
		}
		summary = append(summary, fmt.Sprintf("token=%d bytes", len(tok)))
	}
	if os.Getenv(dispatch.EnvDinD) == "1" {
		if err := os.WriteFile("/var/lib/docker/probe", []byte(order.TaskID), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fakesandbox: /var/lib/docker:", err)
			return 4
		}
	}
	progress := func(step int, msg string, status dispatch.Status) {
		line, _ := json.Marshal(dispatch.Progress{Event: "progress", Time: time.Now().UTC(), TaskID: order.TaskID, Stage: "agent", Message: msg, Step: step, Status: status})
		fmt.Printf("%s\n", line)
	}
	fmt.Println("fakesandbox: starting", order.TaskID)
	for i := 1; i <= 3; i++ {
		progress(i, fmt.Sprintf("step %d", i), "")
	}
	receipt := func(status dispatch.Status) int {
		err := dispatch.WriteResult(order.OutputDir, &dispatch.Result{
			TaskID: order.TaskID, Mode: order.Mode, Status: status, Branch: order.TargetBranch,
			PRSummary: strings.Join(summary, " "),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakesandbox: result:", err)
			return 5
		}
		return 0
	}
	if strings.Contains(order.Task.Body, "hold") {
		<-term
		progress(4, "interrupted", dispatch.StatusInterrupted)
		receipt(dispatch.StatusInterrupted)
		return 143
	}
	progress(4, "done", dispatch.StatusCompleted)
	return receipt(dispatch.StatusCompleted)
}

// taskFence does what the real init does with dispatch.EnvTaskFence: it
// checks that it started as root with CAP_NET_ADMIN (what the fence
// needs), then becomes UID:GID before anything else. It says what it
// found, for the test to compare.
func taskFence() (string, error) {
	v := os.Getenv(dispatch.EnvTaskFence)
	if v == "" {
		return "", nil
	}
	var uid, gid int
	if _, err := fmt.Sscanf(v, "%d:%d", &uid, &gid); err != nil {
		return "", fmt.Errorf("%s=%q: %w", dispatch.EnvTaskFence, v, err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	var eff uint64
	for _, l := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(l, "CapEff:"); ok {
			fmt.Sscanf(strings.TrimSpace(rest), "%x", &eff)
		}
	}
	const capNetAdmin = 12
	found := fmt.Sprintf("fence_uid0=%t net_admin=%t", os.Geteuid() == 0, eff&(1<<capNetAdmin) != 0)
	if err := syscall.Setgroups([]int{gid}); err != nil {
		return "", fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return "", fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return "", fmt.Errorf("setuid: %w", err)
	}
	return found + fmt.Sprintf(" ran_as=%d", os.Geteuid()), nil
}
