package dockerfilter

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
)

// owned are the containers created through the filter during this start
// of the sandbox: the agent's, the runner's and compose's. Everything else
// on the inner daemon (the services and the Supabase stack the init
// started, a previous start's containers) is not the agent's, and its
// namespaces stay its own. The set is in memory: a container's labels and
// its image's would be the agent's word.
type owned struct {
	mu  sync.Mutex
	ids map[string]bool
}

func newOwned() *owned { return &owned{ids: map[string]bool{}} }

// Owns says whether the container with this full id was created through
// the filter.
func (o *owned) Owns(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ids[id]
}

func (o *owned) add(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ids[id] = true
}

// maxCreateAnswer bounds what the filter reads of a create answer ({"Id":
// "…","Warnings":[]}).
const maxCreateAnswer = 64 << 10

// recordCreated is the proxy's ModifyResponse: the id of every container
// the engine created for a request through the filter joins the set.
func (o *owned) recordCreated(resp *http.Response) error {
	seg := splitPath(resp.Request.URL.Path)
	if resp.Request.Method != http.MethodPost || len(seg) != 2 || seg[0] != "containers" || seg[1] != "create" || resp.StatusCode != http.StatusCreated {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCreateAnswer))
	resp.Body.Close()
	if err != nil {
		return err
	}
	var created struct{ ID string }
	if json.Unmarshal(b, &created) == nil && created.ID != "" {
		o.add(created.ID)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

// formBody says why a request's body would be read by dockerd as
// parameters, or "". dockerd reads its query parameters from r.Form
// (httputils.ParseForm), which takes the body of a POST, PUT or PATCH
// sent as application/x-www-form-urlencoded too, ahead of the query; a
// handler that calls FormValue first parses multipart bodies as well.
// The docker CLI sends neither, so the filter refuses both instead of
// reading parameters in two places. The media type is parsed as Go's
// ParseForm parses it: a bad parameter still yields the type.
func formBody(h http.Header) string {
	for _, ct := range h.Values("Content-Type") {
		mt, _, _ := mime.ParseMediaType(ct)
		mt = strings.ToLower(strings.TrimSpace(mt))
		if mt == "" {
			mt, _, _ = strings.Cut(strings.ToLower(strings.TrimSpace(ct)), ";")
		}
		switch mt {
		case "application/x-www-form-urlencoded", "multipart/form-data":
			return mt
		}
	}
	return ""
}
