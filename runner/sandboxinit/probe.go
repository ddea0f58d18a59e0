package sandboxinit

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// probe answers nil once a service is ready.
type probe interface {
	Probe(ctx context.Context) error
	String() string
}

type tcpProbe struct{ addr string }

func (p tcpProbe) Probe(ctx context.Context) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return err
	}
	return c.Close()
}

func (p tcpProbe) String() string { return "tcp " + p.addr }

type httpProbe struct {
	url    string
	client *http.Client
}

func newHTTPProbe(url string) httpProbe {
	return httpProbe{url: url, client: &http.Client{
		Timeout: 2 * time.Second,
		// A redirect already says the server is up.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (p httpProbe) Probe(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s answered %s", p.url, resp.Status)
	}
	return nil
}

func (p httpProbe) String() string { return "http " + p.url }

// execProbe runs the healthcheck command in the service container.
type execProbe struct {
	docker    dockerCLI
	container string
	argv      []string
}

func (p execProbe) Probe(ctx context.Context) error {
	_, err := p.docker.run(ctx, append([]string{"exec", p.container}, p.argv...)...)
	return err
}

func (p execProbe) String() string { return "command " + strings.Join(p.argv, " ") }

// runningProbe is for services with neither ports nor a healthcheck: being
// up is all that can be known.
type runningProbe struct{}

func (runningProbe) Probe(context.Context) error { return nil }
func (runningProbe) String() string              { return "running" }

// probeFor builds the probe a service's healthcheck asks for. ip is the
// service container's address on the inner network.
func probeFor(docker dockerCLI, name, ip string, s sandboxcfg.ResolvedService) (probe, error) {
	hc := s.Healthcheck
	switch hc.Kind() {
	case "tcp":
		return tcpProbe{addr: net.JoinHostPort(ip, strconv.Itoa(hc.TCP))}, nil
	case "http":
		port, path, err := splitHTTPCheck(hc.HTTP, s.Ports)
		if err != nil {
			return nil, fmt.Errorf("services.%s.healthcheck.http: %w", name, err)
		}
		return newHTTPProbe("http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + path), nil
	case "command":
		return execProbe{docker: docker, container: containerName(name), argv: hc.Command}, nil
	}
	return runningProbe{}, nil
}

// splitHTTPCheck reads "/path" (on the first port) or "port:/path".
func splitHTTPCheck(v string, ports []int) (int, string, error) {
	if strings.HasPrefix(v, "/") {
		if len(ports) == 0 {
			return 0, "", fmt.Errorf("%q has no port and the service lists no ports; write port:/path", v)
		}
		return ports[0], v, nil
	}
	p, path, ok := strings.Cut(v, ":")
	if !ok || !strings.HasPrefix(path, "/") {
		return 0, "", fmt.Errorf("%q is neither /path nor port:/path", v)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return 0, "", fmt.Errorf("%q: port %q is not a number between 1 and 65535", v, p)
	}
	return port, path, nil
}

// waitHealthy probes until p succeeds, alive reports the service gone, or
// the timeout passes. The interval starts short because most services are
// ready in well under a second and every sleep adds to sandbox start time.
func waitHealthy(ctx context.Context, p probe, timeout time.Duration, alive func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	interval := 20 * time.Millisecond
	lastAlive := time.Now()
	var last error
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = p.Probe(pctx)
		cancel()
		if last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Checking the container costs a docker call; once a second is
		// enough to stop waiting on a service that crashed.
		if time.Since(lastAlive) > time.Second {
			lastAlive = time.Now()
			if err := alive(ctx); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %s (%d probes, %s): last error: %v", timeout, attempt, p, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
		interval = min(2*interval, 500*time.Millisecond)
	}
}
