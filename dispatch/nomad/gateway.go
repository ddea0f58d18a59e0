package nomad

import (
	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// GatewayItem is the item of the run's Variable holding the model gateway's
// providers file (with the provider keys).
const GatewayItem = "gateway"

// GatewayPath is where the sandbox's init reads the providers file: a
// directory of its own under secrets/, which the init hides once read.
const GatewayPath = "/secrets/gateway/" + dispatch.GatewayFileName

// gatewayTemplate renders the providers file from the run's Variable,
// owned by root, mode 0400: only the init (root) reads it. In task mode the
// container runs as the sandbox user, which must own it instead.
func gatewayTemplate(o Options, jobID string, taskMode bool) *api.Template {
	uid, gid := 0, 0
	if taskMode {
		uid, gid = dispatch.AgentUID, dispatch.AgentUID
	}
	return &api.Template{
		EmbeddedTmpl: ptr(`{{ with nomadVar "` + TokenVarPath(jobID) + `" }}{{ .` + GatewayItem + ` }}{{ end }}`),
		DestPath:     ptr("secrets/gateway/" + dispatch.GatewayFileName),
		// The init reads it once at start; a change needs no signal.
		ChangeMode: ptr("noop"),
		Perms:      ptr("0400"),
		Uid:        ptr(uid),
		Gid:        ptr(gid),
	}
}

// addGatewayItem puts the providers file in the run's Variable items.
func (b *jobs) addGatewayItem(items api.VariableItems) error {
	if b.o.Gateway == nil {
		return nil
	}
	content, err := b.o.Gateway.Encode()
	if err != nil {
		return err
	}
	items[GatewayItem] = string(content)
	return nil
}
