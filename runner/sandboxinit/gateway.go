package sandboxinit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/gateway"
)

// startGateway serves the model gateway when the work order names its
// providers file: the init reads the keys, hides the file from everyone
// after it, and serves the gateway on loopback from this root process for
// as long as the sandbox runs. env gets the gateway's address for the
// runner. The keys stay in this process's memory only.
func startGateway(ctx context.Context, log zerolog.Logger, order *dispatch.WorkOrder, acct *account, env map[string]string) error {
	if order == nil || order.GatewayFile == "" {
		return nil
	}
	file := order.GatewayFile
	cfg, err := gateway.Load(file)
	if err != nil {
		return err
	}
	if err := hideGatewayFile(log, file, acct, mountEmpty); err != nil {
		return err
	}
	log = log.With().Str("component", "model-gateway").Logger()
	g, err := gateway.New(cfg, gateway.Options{Logger: log})
	if err != nil {
		return err
	}
	srv, err := gateway.Serve(ctx, g, "127.0.0.1:0")
	if err != nil {
		return err
	}
	maps.Copy(env, srv.Env(cfg))
	log.Info().Str("address", srv.URL).Strs("providers", g.Providers()).Msg("model gateway serving")
	return nil
}

// hideGatewayFile mounts an empty read-only tmpfs over the file's directory,
// so neither the runner nor the agent can open it whatever its owner and
// mode on the host. That needs CAP_SYS_ADMIN (privileged and caps
// profiles). Without it the file's own permissions must keep the sandbox
// user out; in a sandbox with no second identity (acct nil: task mode, the
// init is the sandbox user) nothing can, and that is said in the log.
func hideGatewayFile(log zerolog.Logger, file string, acct *account, mount func(dir string) error) error {
	dir := filepath.Dir(file)
	err := mount(dir)
	if err == nil {
		if _, statErr := os.Stat(file); !errors.Is(statErr, os.ErrNotExist) {
			return fmt.Errorf("model gateway: %s is still visible after mounting over %s", file, dir)
		}
		return nil
	}
	if acct == nil {
		log.Warn().Err(err).Str("file", file).Int("uid", os.Geteuid()).
			Msg("model gateway: the providers file cannot be hidden and the agent runs as this same user: it can read the provider keys (a sandbox without a second identity, such as task mode)")
		return nil
	}
	st, statErr := os.Stat(file)
	if statErr != nil {
		return fmt.Errorf("model gateway: %w", statErr)
	}
	if readableBy(st, *acct) {
		return fmt.Errorf("model gateway: cannot hide %s (mount over %s: %v) and user %s (uid %d) can read it: write it owned by root, mode 0400",
			file, dir, err, acct.Name, acct.UID)
	}
	log.Debug().Err(err).Str("file", file).Msg("model gateway: providers file not hidden; its permissions keep the sandbox user out")
	return nil
}

// mountEmpty mounts an empty read-only tmpfs on dir.
func mountEmpty(dir string) error {
	return syscall.Mount("tmpfs", dir, "tmpfs",
		syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "size=4k,mode=0755")
}

// readableBy is the permission check the kernel makes for a user without
// capabilities.
func readableBy(st os.FileInfo, a account) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := st.Mode().Perm()
	switch {
	case int(sys.Uid) == a.UID:
		return mode&0o400 != 0
	case int(sys.Gid) == a.GID || slices.Contains(a.Groups, int(sys.Gid)):
		return mode&0o040 != 0
	default:
		return mode&0o004 != 0
	}
}
