package dockerfilter

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// versionPrefix is the API version the CLI puts before every path.
var versionPrefix = regexp.MustCompile(`^/v[0-9]+(\.[0-9]+)?/`)

// minAPIVersion is the oldest API version forwarded: before 1.24 the
// engine took a HostConfig in the body of POST /containers/{id}/start.
const minAPIVersion = 24

// request is what a route needs of an HTTP request.
type request struct {
	method string
	// minor is the API version's minor number (-1 for an unversioned path).
	minor int
	// version is the path's version prefix ("/v1.41", or "").
	version string
	path    []string // segments after the version prefix
	query   map[string][]string
	// hasBody says whether the request carries a body (or may: chunked).
	hasBody bool
	body    func() ([]byte, error)
}

// verdict is what the filter does with a request: forward it as it is
// (body nil, path ""), forward body instead of the original and to path
// instead of the one asked for, or refuse with err.
type verdict struct {
	body []byte
	path string
	err  error
}

// swarmRoots are the endpoints of swarm mode, which could schedule
// services with any setting on the engine.
var swarmRoots = map[string]bool{"swarm": true, "services": true, "nodes": true, "tasks": true, "secrets": true, "configs": true}

// readOnlyContainerOps act on a container without giving its holder
// anything the container has: they pass whoever made the container.
// rename is not one of them: a container's name is what other requests
// (a join, a start) resolve, so only the agent's own may change it.
var readOnlyContainerOps = map[string]bool{
	"json": true, "top": true, "logs": true, "changes": true, "stats": true, "export": true, "wait": true,
	"resize": true, "kill": true, "stop": true, "pause": true, "unpause": true,
}

// decide applies the policy to one request. Every endpoint is listed:
// what the list does not name is refused.
func (p *Policy) decide(ctx context.Context, r request) verdict {
	seg := r.path
	n := len(seg)
	if n == 0 {
		return verdict{err: refuse("the API root is not an endpoint")}
	}
	if r.minor >= 0 && r.minor < minAPIVersion {
		return verdict{err: refuse("API version 1.%d is refused: the filter forwards API 1.%d and later (older versions took host settings at container start)", r.minor, minAPIVersion)}
	}
	withBody := func(check func([]byte) ([]byte, error)) verdict {
		b, err := r.body()
		if err != nil {
			return verdict{err: err}
		}
		out, err := check(b)
		return verdict{body: out, err: err}
	}
	get := r.method == http.MethodGet || r.method == http.MethodHead
	switch root := seg[0]; {
	case root == "images" && n == 2 && seg[1] == "create" && len(r.query["fromSrc"]) > 0 && r.query["fromSrc"][0] != "-":
		return verdict{err: refuse("docker import from a URL is refused: the daemon would fetch it as root, past the agent's egress fence; download it and import the file")}
	case root == "_ping" || root == "version" || root == "info" || root == "events" || root == "auth" ||
		root == "system" || root == "commit" || root == "session" || root == "images" || root == "exec":
		return verdict{}
	case root == "distribution" && get:
		return verdict{}
	case root == "plugins" && get && n == 1:
		return verdict{}
	case root == "plugins":
		return verdict{err: refuse("plugins are refused: a plugin runs with the host's privileges")}
	case swarmRoots[root]:
		return verdict{err: refuse("swarm mode (/%s) is refused: its services and tasks bypass the filter", root)}
	case root == "grpc":
		return verdict{err: refuse("the raw BuildKit API (/grpc, used by buildx) is refused: it lets the client ask for network.host and security.insecure; use docker build")}
	case root == "build":
		if n == 1 && r.method == http.MethodPost {
			return verdict{err: checkBuildQuery(r.query)}
		}
		if n == 2 && (seg[1] == "prune" || seg[1] == "cancel") {
			return verdict{}
		}
	case root == "containers":
		return p.decideContainer(ctx, r, withBody)
	case root == "networks":
		switch {
		case get || r.method == http.MethodDelete:
			return verdict{}
		case n == 2 && seg[1] == "create":
			return withBody(p.CreateNetwork)
		case n == 2 && seg[1] == "prune":
			return verdict{}
		case n == 3 && (seg[2] == "connect" || seg[2] == "disconnect"):
			return withBody(func(b []byte) ([]byte, error) { return p.ConnectNetwork(ctx, seg[1], seg[2] == "connect", b) })
		}
	case root == "volumes":
		switch {
		case get || r.method == http.MethodDelete:
			return verdict{}
		case n == 2 && seg[1] == "create":
			return withBody(p.CreateVolume)
		case n == 2 && seg[1] == "prune":
			return verdict{}
		}
	}
	return verdict{err: refuse("%s /%s is refused: the filter does not forward this endpoint", r.method, strings.Join(seg, "/"))}
}

func (p *Policy) decideContainer(ctx context.Context, r request, withBody func(func([]byte) ([]byte, error)) verdict) verdict {
	seg := r.path
	switch len(seg) {
	case 2:
		switch {
		case seg[1] == "json" || seg[1] == "prune" || r.method == http.MethodDelete:
			return verdict{}
		case seg[1] == "create":
			return withBody(func(b []byte) ([]byte, error) { return p.CreateContainer(ctx, b) })
		}
	case 3, 4:
		id, op := seg[1], seg[2]
		if len(seg) == 4 && !(op == "attach" && seg[3] == "ws") {
			break
		}
		switch {
		case readOnlyContainerOps[op]:
			return verdict{}
		case op == "archive" && (r.method == http.MethodGet || r.method == http.MethodHead):
			return verdict{}
		case op == "start" && r.hasBody:
			return verdict{err: refuse("a body on POST /containers/%s/start is refused: host settings belong in the create request", id)}
		case op == "start" || op == "restart" || op == "attach" || op == "archive":
			c, err := p.checkExisting(ctx, id, op)
			return pinned(r, c, err)
		case op == "rename":
			// The names of the others (the init's services, the Supabase
			// stack) are what a later request by name resolves.
			c, err := p.agentsOwn(ctx, id, "renaming", "and its name is what other requests resolve")
			return pinned(r, c, err)
		case op == "exec":
			var c *Existing
			v := withBody(func(b []byte) (out []byte, err error) {
				c, out, err = p.CreateExec(ctx, id, b)
				return out, err
			})
			if v.err == nil {
				v.path = pinnedPath(r, c.ID)
			}
			return v
		case op == "update":
			return withBody(p.UpdateContainer)
		}
	}
	return verdict{err: refuse("%s /%s is refused: the filter does not forward this endpoint", r.method, strings.Join(seg, "/"))}
}

// pinned forwards a request on the container c the filter checked, by its
// full id: the engine resolves the name in the path again when the request
// reaches it, and the agent could have renamed containers in between so
// that the same name means another one.
func pinned(r request, c *Existing, err error) verdict {
	if err != nil {
		return verdict{err: err}
	}
	return verdict{path: pinnedPath(r, c.ID)}
}

// pinnedPath is r's path with the container reference replaced by id.
func pinnedPath(r request, id string) string {
	seg := append([]string{r.path[0], url.PathEscape(id)}, r.path[2:]...)
	return r.version + "/" + strings.Join(seg, "/")
}

// agentsOwn resolves ref to a container the agent created through the
// filter, or refuses what was asked (why says why that matters).
func (p *Policy) agentsOwn(ctx context.Context, ref, what, why string) (*Existing, error) {
	if ref == "" {
		return nil, &noSuchContainer{}
	}
	c, err := p.Inspect.Container(ctx, ref)
	if err != nil {
		return nil, err
	}
	if c == nil || c.ID == "" {
		return nil, &noSuchContainer{ref: ref}
	}
	if p.Owned == nil || !p.Owned.Owns(c.ID) {
		return nil, refuse("%s container %s is refused: the agent did not create it through this filter, %s", what, ref, why)
	}
	return c, nil
}

// apiMinor returns the minor number of the path's API version: -1 when
// it has none, 0 for a bare major ("/v1/") or one that is not 1.x.
func apiMinor(p string) int {
	m := versionPrefix.FindStringSubmatch(p)
	if m == nil {
		return -1
	}
	if !strings.HasPrefix(m[0], "/v1.") && !strings.HasPrefix(m[0], "/v1/") {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(m[1], "."))
	return n
}

// versionOf is the path's version prefix without its last slash
// ("/v1.41"), or "".
func versionOf(p string) string {
	if loc := versionPrefix.FindStringIndex(p); loc != nil {
		return p[:loc[1]-1]
	}
	return ""
}

// splitPath strips the version prefix and splits the rest.
func splitPath(p string) []string {
	if loc := versionPrefix.FindStringIndex(p); loc != nil {
		p = p[loc[1]-1:]
	}
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
