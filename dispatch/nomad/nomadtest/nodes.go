package nomadtest

import (
	"maps"
	"net/http"
	"net/url"

	"github.com/hashicorp/nomad/api"
)

// node is the fake's one client node.
func (s *Server) node() *api.Node {
	u, _ := url.Parse(s.URL)
	return &api.Node{
		ID: NodeID, Name: "nomadtest-client", Datacenter: "dc1", NodePool: "default",
		HTTPAddr: u.Host, Status: "ready", SchedulingEligibility: "eligible",
		Attributes: s.attributes(),
		Drivers:    map[string]*api.DriverInfo{"docker": {Detected: true, Healthy: true}},
	}
}

// listNodes answers GET /v1/nodes with the one node.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	if c := callerOf(r); !c.management() && !c.policy.allowNode() {
		permissionDenied(w)
		return
	}
	n := s.node()
	s.writeJSON(w, http.StatusOK, s.Index(), []*api.NodeListStub{{
		ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodePool: n.NodePool, Address: n.HTTPAddr,
		Status: n.Status, SchedulingEligibility: n.SchedulingEligibility, Drivers: n.Drivers,
	}})
}

// fingerprinter is a Driver that reports node attributes of its own (the
// docker driver's runtimes), as Nomad's drivers fingerprint their node.
type fingerprinter interface {
	Fingerprint() (map[string]string, error)
}

// attributes are the node's: the docker driver's, privileged containers
// allowed, and what the Driver fingerprinted at start.
func (s *Server) attributes() map[string]string {
	a := map[string]string{"driver.docker": "1", "driver.docker.privileged.enabled": "1", "driver.docker.runtimes": "runc"}
	maps.Copy(a, s.fingerprint)
	return a
}
