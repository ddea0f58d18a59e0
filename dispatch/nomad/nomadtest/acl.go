package nomadtest

import (
	"fmt"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Policy is a Nomad ACL policy, as far as the fake enforces one: the
// namespace rules (capabilities, and variables by path), node and node
// pool read, and host volumes. ParsePolicy reads one from the policy
// language, so a test can hold the fake to the very file an operator
// applies (deploy/nomad/sandbox-bot.policy.hcl).
type Policy struct {
	Namespaces  []NamespaceRule  `hcl:"namespace,block"`
	Node        *PolicyLevel     `hcl:"node,block"`
	NodePools   []NamedLevel     `hcl:"node_pool,block"`
	HostVolumes []HostVolumeRule `hcl:"host_volume,block"`
}

// NamespaceRule is a policy's namespace block; its name may be a glob.
type NamespaceRule struct {
	Name         string         `hcl:"name,label"`
	Policy       string         `hcl:"policy,optional"`
	Capabilities []string       `hcl:"capabilities,optional"`
	Variables    *VariableRules `hcl:"variables,block"`
}

// VariableRules are a namespace's variables block.
type VariableRules struct {
	Paths []VariablePath `hcl:"path,block"`
}

// VariablePath grants capabilities on the variables a path glob matches.
type VariablePath struct {
	Path         string   `hcl:"path,label"`
	Capabilities []string `hcl:"capabilities"`
}

// PolicyLevel is a coarse rule: deny, read or write.
type PolicyLevel struct {
	Policy string `hcl:"policy"`
}

// NamedLevel is a coarse rule on one named object (a node pool).
type NamedLevel struct {
	Name   string `hcl:"name,label"`
	Policy string `hcl:"policy"`
}

// HostVolumeRule is a policy's host_volume block.
type HostVolumeRule struct {
	Name         string   `hcl:"name,label"`
	Policy       string   `hcl:"policy,optional"`
	Capabilities []string `hcl:"capabilities,optional"`
}

// ParsePolicy reads a policy written in Nomad's policy language. A block
// the fake does not know is an error, so a policy cannot lean on a rule
// the fake would not enforce.
func ParsePolicy(name string, src []byte) (*Policy, error) {
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("nomadtest: policy %s: %s", name, diags.Error())
	}
	var p Policy
	if diags := gohcl.DecodeBody(f.Body, nil, &p); diags.HasErrors() {
		return nil, fmt.Errorf("nomadtest: policy %s: %s", name, diags.Error())
	}
	return &p, nil
}

// ReadPolicy reads and parses the policy file at name.
func ReadPolicy(name string) (*Policy, error) {
	src, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("nomadtest: %w", err)
	}
	return ParsePolicy(name, src)
}

// Namespace capabilities of Nomad's coarse namespace policies (the job
// side; variables need a variables block).
var nsPolicyCaps = map[string][]string{
	"read":  {"list-jobs", "parse-job", "read-job"},
	"write": {"list-jobs", "parse-job", "read-job", "submit-job", "dispatch-job", "read-logs", "read-fs", "alloc-exec", "alloc-lifecycle"},
}

// namespace returns the rule that governs ns: an exact label, else the
// glob that matches most of it, as Nomad picks.
func (p *Policy) namespace(ns string) *NamespaceRule {
	var best *NamespaceRule
	bestLen := -1
	for i := range p.Namespaces {
		r := &p.Namespaces[i]
		if r.Name == ns {
			return r
		}
		if ok, _ := path.Match(r.Name, ns); ok && len(strings.ReplaceAll(r.Name, "*", "")) > bestLen {
			best, bestLen = r, len(strings.ReplaceAll(r.Name, "*", ""))
		}
	}
	return best
}

// allowNs says whether the policy grants capability in namespace ns.
func (p *Policy) allowNs(ns, capability string) bool {
	r := p.namespace(ns)
	if r == nil || r.Policy == "deny" || slices.Contains(r.Capabilities, "deny") {
		return false
	}
	return slices.Contains(r.Capabilities, capability) || slices.Contains(nsPolicyCaps[r.Policy], capability)
}

// allowVar says whether the policy grants capability on the variable at
// varPath in ns: the longest path glob that matches decides.
func (p *Policy) allowVar(ns, varPath, capability string) bool {
	r := p.namespace(ns)
	if r == nil || r.Variables == nil {
		return false
	}
	var caps []string
	best := -1
	for _, vp := range r.Variables.Paths {
		if globMatch(vp.Path, varPath) && len(vp.Path) > best {
			caps, best = vp.Capabilities, len(vp.Path)
		}
	}
	return !slices.Contains(caps, "deny") && slices.Contains(caps, capability)
}

// globMatch is a variable path glob: "*" stands for any run of
// characters, slashes included.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

func (p *Policy) allowNode() bool {
	return p.Node != nil && (p.Node.Policy == "read" || p.Node.Policy == "write")
}

// allowHostVolume says whether the policy lets a job mount the host
// volume name, read-only or read-write.
func (p *Policy) allowHostVolume(name string, readOnly bool) bool {
	for _, h := range p.HostVolumes {
		if ok, _ := path.Match(h.Name, name); !ok {
			continue
		}
		caps := h.Capabilities
		switch h.Policy {
		case "read":
			caps = append(caps, "mount-readonly")
		case "write":
			caps = append(caps, "mount-readonly", "mount-readwrite")
		}
		if slices.Contains(caps, "mount-readwrite") || (readOnly && slices.Contains(caps, "mount-readonly")) {
			return true
		}
	}
	return false
}

// caller is who sent a request: management (every capability), or a
// token with a policy.
type caller struct {
	policy *Policy
}

func (c caller) management() bool { return c.policy == nil }

func (c caller) ns(ns, capability string) bool {
	return c.management() || c.policy.allowNs(ns, capability)
}

func (c caller) variable(ns, varPath, capability string) bool {
	return c.management() || c.policy.allowVar(ns, varPath, capability)
}

// whoIs resolves the request's token, or answers it as Nomad does when
// it cannot (403). Without Options.ACL every token Options.ACLToken
// admits is management.
func (s *Server) whoIs(w http.ResponseWriter, r *http.Request) (caller, bool) {
	tok := r.Header.Get("X-Nomad-Token")
	switch {
	case s.opts.ACLToken != "" && tok == s.opts.ACLToken:
		return caller{}, true
	case s.opts.ACL == nil && s.opts.ACLToken == "":
		return caller{}, true
	case s.opts.ACL == nil:
		http.Error(w, "Permission denied", http.StatusForbidden)
		return caller{}, false
	}
	p := s.opts.ACL[tok]
	if p == nil {
		http.Error(w, "ACL token not found", http.StatusForbidden)
		return caller{}, false
	}
	return caller{policy: p}, true
}

// permissionDenied is Nomad's answer to a token without the capability.
func permissionDenied(w http.ResponseWriter) {
	http.Error(w, "Permission denied", http.StatusForbidden)
}

// namespaceExists says whether ns is "default" or one of Options.Namespaces.
func (s *Server) namespaceExists(ns string) bool {
	return ns == api.DefaultNamespace || slices.Contains(s.opts.Namespaces, ns)
}

// callerKey holds the request's caller in its context.
type callerKey struct{}

// callerOf is who sent r (set by serve).
func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(callerKey{}).(caller)
	return c
}

// namespaceInfo answers GET /v1/namespace/<name>: any capability in the
// namespace lets a token read it.
func (s *Server) namespaceInfo(w http.ResponseWriter, r *http.Request, name string) {
	c := callerOf(r)
	if !c.management() && c.policy.namespace(name) == nil {
		permissionDenied(w)
		return
	}
	if !s.namespaceExists(name) {
		http.Error(w, "namespace not found", http.StatusNotFound)
		return
	}
	s.writeJSON(w, http.StatusOK, s.Index(), &api.Namespace{Name: name})
}

// maySubmit checks what Nomad checks before it registers a job: the
// namespace exists, the caller may submit jobs there and mount every host
// volume the job names. It answers the request when not.
func (s *Server) maySubmit(w http.ResponseWriter, r *http.Request, job *api.Job) bool {
	c := callerOf(r)
	if !c.ns(*job.Namespace, "submit-job") {
		permissionDenied(w)
		return false
	}
	for _, g := range job.TaskGroups {
		for _, v := range g.Volumes {
			if v.Type == "host" && !c.management() && !c.policy.allowHostVolume(v.Source, v.ReadOnly) {
				permissionDenied(w)
				return false
			}
		}
	}
	if !s.namespaceExists(*job.Namespace) {
		http.Error(w, fmt.Sprintf("job %q is in nonexistent namespace %q", *job.ID, *job.Namespace), http.StatusInternalServerError)
		return false
	}
	return true
}
