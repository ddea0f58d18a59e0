package sandboxinit

// The egress allowlist (network.allow in .sandbox.yml). When it is set the
// init runs a filtering forward proxy on loopback, points the runner and
// the agent at it with the usual proxy variables, and fences the sandbox
// user in with iptables so that a program ignoring those variables cannot
// get out either. The proxy itself runs in the init, as root, which the
// fence does not cover: it is the only way out for the sandbox user.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// ProxyAddr is where the filtering proxy listens inside the sandbox.
const ProxyAddr = "127.0.0.1:3128"

// proxyEnv is what the runner and the agent get: the proxy in both the
// upper- and lower-case spellings (curl reads only http_proxy, Go and Node
// tools the upper case), and NO_PROXY for loopback and the services, which
// are reached directly.
func proxyEnv(addr string, svcs dispatch.Services) map[string]string {
	u := "http://" + addr
	noProxy := []string{"localhost", "127.0.0.1", "::1"}
	for _, name := range sortedNames(svcs) {
		noProxy = append(noProxy, name)
		if h, _, err := net.SplitHostPort(svcs[name]); err == nil {
			noProxy = append(noProxy, h)
		}
	}
	np := strings.Join(dedupe(noProxy), ",")
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": np, "no_proxy": np,
	}
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// egressAllow enforces network.allow: the filtering proxy and the fence
// that holds the sandbox user and the inner daemon to it. Its proxy
// refuses the egress defaults' denied networks too, and lets their
// exceptions through.
type egressAllow struct {
	log      zerolog.Logger
	order    *dispatch.WorkOrder
	inner    bool // the fence covers the inner daemon's containers
	ipv6     bool
	defaults *egressDefaults

	proxy *egress // once started
}

// set reports whether network.allow is set: then it holds the sandbox
// user and the inner daemon.
func (ea *egressAllow) set() bool {
	return ea.order != nil && len(ea.order.Config.Network.Allow) > 0
}

// stop stops the proxy.
func (ea *egressAllow) stop() {
	if ea.proxy != nil {
		ea.proxy.stop()
		ea.proxy = nil
	}
}

// egress is the running allowlist: the proxy's server.
type egress struct {
	allow *allowlist
	srv   *http.Server
	done  chan struct{}
}

func (e *egress) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx)
	<-e.done
}

// start enforces network.allow for acct: proxy first (so that the
// fence never cuts the runner off from a way out that does not exist yet),
// then the fence. The proxy may be running already, open for the start
// (startProxy): from here on it lets through only the allowlist.
// It returns the variables the runner gets, which reach the services
// svcs directly.
func (ea *egressAllow) start(ctx context.Context, acct *account, run ipTables, svcs dispatch.Services) (map[string]string, error) {
	cfg := ea.order.Config.Network
	if acct == nil || os.Geteuid() != 0 {
		return nil, errors.New("network.allow is set, but the sandbox init is not root, so it cannot fence the sandbox user in " +
			"(task mode runs unprivileged: drop network.allow there, or run a coding sandbox)")
	}
	if ea.proxy == nil {
		if err := ea.startProxy(); err != nil {
			return nil, err
		}
	}
	ea.proxy.allow.closeStart()
	nf := ea.defaults.netfilter()
	spec := fenceSpec{uids: fenceUIDs(*acct), resolvConf: "/etc/resolv.conf", ipv6: ea.ipv6, forward: ea.inner, nf: &nf}
	if ea.inner {
		spec.gids = []int{daemonGID}
	}
	if err := fence(ctx, run, spec); err != nil {
		return nil, fmt.Errorf("network.allow is set but the egress fence could not be installed, so the sandbox would run unrestricted: %w", err)
	}
	ea.log.Info().Strs("allow", cfg.Allow).Str("proxy", ProxyAddr).Ints("uids", spec.uids).Ints("gids", spec.gids).Msg("egress allowlist enforced")
	return proxyEnv(ProxyAddr, svcs), nil
}

// startProxy starts the filtering proxy, open for the start: until
// start closes it, what only the init and the inner daemon can ask
// for (service images, Supabase's) passes unless it is on a denied
// network, as it did before the proxy existed. Nothing of the agent's
// runs yet.
func (ea *egressAllow) startProxy() error {
	allow, err := newAllowlist(ea.order.Config.Network.Allow, alwaysAllowed(ea.order), ea.defaults.deny.nets)
	if allow != nil {
		allow.exempt = ea.defaults.deny.allow
	}
	if err != nil {
		return err
	}
	allow.openForStart()
	l, err := net.Listen("tcp", ProxyAddr)
	if err != nil {
		return fmt.Errorf("egress proxy: listen on %s: %w", ProxyAddr, err)
	}
	// The init's logger already names its component; the messages say
	// "egress" so that a grep for it finds every decision.
	log := ea.log
	upstream := upstreamFromEnv(os.Getenv)
	if upstream != nil {
		// Never the URL itself: it may carry the proxy's credentials.
		log.Info().Msg("egress proxy connects through the sandbox's upstream proxy (HTTP(S)_PROXY)")
	}
	e := &egress{
		allow: allow,
		srv: &http.Server{
			Handler:           newEgressProxy(allow, log, upstream),
			ReadHeaderTimeout: 30 * time.Second,
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("egress proxy stopped")
		}
	}()
	ea.proxy = e
	return nil
}

// daemonGID is the group the inner dockerd runs as (its user stays root)
// when network.allow is set: the fence matches it, so the daemon's own
// connections (pulls, pushes, a build's ADD of a URL, an import from a
// URL) go nowhere but the proxy. No file or account of the image has it.
const daemonGID = 2375

// fenceDaemon holds the inner daemon to the proxy before it starts: the
// fence's chain with the daemon's group jumped to it. The sandbox user's
// jumps and the forwarding rules follow in start, once the services
// are up.
func (ea *egressAllow) fenceDaemon(ctx context.Context, run ipTables) error {
	if err := ea.startProxy(); err != nil {
		return err
	}
	nf := ea.defaults.netfilter()
	spec := fenceSpec{gids: []int{daemonGID}, resolvConf: "/etc/resolv.conf", ipv6: ea.ipv6, nf: &nf}
	if err := fence(ctx, run, spec); err != nil {
		return fmt.Errorf("network.allow is set but the inner Docker daemon could not be fenced, so its pulls and pushes would go anywhere: %w", err)
	}
	ea.log.Info().Int("gid", daemonGID).Str("proxy", ProxyAddr).Msg("inner Docker daemon held to the egress proxy")
	return nil
}

// daemonProxyEnv points the inner daemon's registry, build and import
// traffic at the proxy, whatever the init's own environment says (an
// operator's proxy is the egress proxy's upstream, not the daemon's).
func daemonProxyEnv() []string {
	u := "http://" + ProxyAddr
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u, "NO_PROXY=", "no_proxy="}
}

// agentUser is the account the agent runs as. The runner may get an
// account of its own; the allowlist fences both, since whatever the agent
// starts runs as one of them.
const agentUser = "sandbox"

// fenceUIDs are the uids network.allow holds: the account the runner was
// started as and the agent's.
func fenceUIDs(runner account) []int {
	uids := []int{runner.UID}
	if a, err := lookupAccount(agentUser); err == nil && a.UID != runner.UID {
		uids = append(uids, a.UID)
	}
	return uids
}
