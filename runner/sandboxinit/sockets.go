package sandboxinit

// No container in the sandbox holds the inner daemon's real socket: the
// filter's policy keeps the agent from binding it, and the init checks
// what it started itself (the services, the Supabase stack) before the
// runner starts. A container that holds it is root over every container
// and, through them, over the sandbox; and whoever joins its namespaces
// holds it too.

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// daemonSockets are the sockets that hand out root: dockerd's and
// containerd's, by both spellings of /var/run (a link to /run).
var daemonSockets = []string{dockerSocket, containerdSocket}

// holdsDaemonSocket says whether a bind mount of src shows the container
// one of the daemon sockets: the socket itself or a directory above it.
func holdsDaemonSocket(src string) bool {
	src = path.Clean(src)
	if strings.HasPrefix(src+"/", "/var/run/") {
		src = "/run" + strings.TrimPrefix(src, "/var/run")
	}
	for _, sock := range daemonSockets {
		sock = path.Clean(strings.Replace(sock, "/var/run/", "/run/", 1))
		if src == sock || src == "/" || strings.HasPrefix(sock, src+"/") {
			return true
		}
	}
	return false
}

// checkNoSocketHolder fails the start when any container on the inner
// daemon binds a daemon socket (or a directory above one), naming it.
func (e engine) checkNoSocketHolder(ctx context.Context) error {
	var list []struct {
		ID     string
		Names  []string
		Mounts []struct{ Type, Source string }
	}
	if err := e.call(ctx, "ps -a", "GET", "/containers/json?all=1", nil, "", &list); err != nil {
		return err
	}
	for _, c := range list {
		for _, m := range c.Mounts {
			if m.Type == "bind" && holdsDaemonSocket(m.Source) {
				name := c.ID
				if len(c.Names) > 0 {
					name = strings.TrimPrefix(c.Names[0], "/")
				}
				return fmt.Errorf("container %s binds %s, which holds the inner Docker daemon's socket: "+
					"a container with it is root over the sandbox, and the agent could reach it through its namespaces; "+
					"the sandbox does not start (Supabase's log collector is turned off for this reason: analytics.enabled = false)", url.PathEscape(name), m.Source)
			}
		}
	}
	return nil
}
