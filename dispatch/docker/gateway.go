package docker

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// writeGateway puts the model gateway's providers file (the provider keys)
// in the task's secrets, under gateway/: never in the container's
// environment or env file. In a coding sandbox it belongs to root, mode
// 0400, and the init hides the directory once it has read it; in task mode
// the init runs as the sandbox user and must be able to read it, which is
// that mode's stated limit.
func (b *taskFiles) writeGateway(dir string, task bool) error {
	if b.o.Gateway == nil {
		return nil
	}
	content, err := b.o.Gateway.Encode()
	if err != nil {
		return err
	}
	gw := filepath.Join(dir, "secrets", "gateway")
	if err := os.MkdirAll(gw, 0o700); err != nil {
		return fmt.Errorf("model gateway dir: %w", err)
	}
	p := filepath.Join(gw, dispatch.GatewayFileName)
	if err := writeFile(p, content, 0o400); err != nil {
		return fmt.Errorf("write the model gateway's providers file: %w", err)
	}
	if os.Geteuid() != 0 {
		// Root in a coding sandbox reads it whoever owns it on the host;
		// in task mode only a bot running as the sandbox user can hand it
		// over.
		if task && os.Geteuid() != b.o.SandboxUID {
			if err := os.Chmod(gw, 0o755); err != nil {
				return err
			}
			return os.Chmod(p, 0o444)
		}
		return nil
	}
	uid, gid := 0, 0
	if task {
		uid, gid = b.o.SandboxUID, b.o.SandboxGID
	}
	for _, f := range []string{gw, p} {
		if err := os.Chown(f, uid, gid); err != nil {
			return fmt.Errorf("model gateway file: %w", err)
		}
	}
	return nil
}

// gatewayFile is where the init finds the providers file, or "".
func (b *taskFiles) gatewayFile() string {
	if b.o.Gateway == nil {
		return ""
	}
	return dispatch.GatewayDir + "/" + dispatch.GatewayFileName
}
