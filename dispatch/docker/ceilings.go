package docker

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// engineCPUs is the CPU count of the engine's host, 0 when it cannot be
// read. `docker run --cpus` refuses more than the host has, so a default
// CPU ceiling (4) must shrink to fit a smaller host instead of failing
// every run there.
func engineCPUs(docker string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, docker, "info", "--format", "{{.NCPU}}").Output()
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// defaultCPU is the CPU bound (millicores) of a sandbox whose work order
// asks for none: the configured one, no more than the host has.
func defaultCPU(configured, hostCPUs int) int {
	if hostCPUs > 0 && configured > hostCPUs*1000 {
		return hostCPUs * 1000
	}
	return configured
}
