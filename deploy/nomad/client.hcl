# Nomad client configuration for nodes that run sandbox-bot sandboxes. Merge
# it into the client agent's configuration (e.g. /etc/nomad.d/sandbox.hcl)
# and restart the agent. Keep these nodes in their own node pool: the docker
# plugin settings below apply to every job placed on them.

client {
  enabled   = true
  node_pool = "sandbox"

  # The sandbox job asks for kill_timeout = "60s" so the runner can push and
  # write its interrupted receipt on SIGTERM; the client caps any task's
  # kill_timeout at this value (Nomad's default is 30s).
  max_kill_timeout = "90s"

  # Allocation directories hold the inner daemon's /var/lib/docker; collect
  # them before the disk fills.
  gc_disk_usage_threshold = 70
  gc_max_allocs           = 50

  # The setup cache: what lifecycle.setup produced (node_modules, .venv),
  # one directory per repository, written by the sandboxes' runner user
  # (uid 1001) only; the sandbox's init narrows the volume to the run's
  # repository before anything else runs. Name it to the bot with
  # SANDBOX_NOMAD_SETUP_CACHE_VOLUME=sandbox-setup-cache. Create the
  # directory root-owned, mode 0711; the sandboxes bound it
  # (SANDBOX_SETUP_CACHE_NODE_MAX_SIZE). Clear it with rm -rf of its
  # contents while no sandbox runs, or of one repository's directory.
  host_volume "sandbox-setup-cache" {
    path      = "/var/lib/sandbox-bot/setup-cache"
    read_only = false
  }
}

# Sandboxes must not reach each other: the docker driver puts them on the
# engine's default bridge, so on these nodes set, in /etc/docker/daemon.json,
#   { "icc": false }
# and restart dockerd (the default bridge then drops traffic between its
# containers; the host and the outside stay reachable).
plugin "docker" {
  config {
    # privileged isolation profile (the production default).
    allow_privileged = true

    # caps isolation profile, for hosts that refuse privileged containers:
    # the job adds every capability and drops sys_resource. The gvisor
    # profile needs it too (the grants are then towards gVisor's kernel).
    # Task-mode jobs, in every profile, add net_admin, net_raw, setuid,
    # setgid, setpcap and kill for their init alone (it installs the egress
    # defaults and the host wall, then runs the agent with no capability
    # at all); a client that does not allow "all" must list at least
    # those (Nomad's default list lacks net_admin and net_raw).
    allow_caps = ["all"]

    # gvisor isolation profile (SANDBOX_ISOLATION=gvisor): the job asks
    # for runtime = "runsc" and is placed only on clients whose engine has
    # it (attribute driver.docker.runtimes). Register it with the node's
    # Docker engine first, in /etc/docker/daemon.json:
    #   "runtimes": {"runsc": {"path": "/usr/local/bin/runsc",
    #                          "runtimeArgs": ["--net-raw"]}}
    # (--net-raw: the sandbox's egress fences are iptables rules in gVisor's
    # netstack; runsc from gVisor's Go module, built static: CGO_ENABLED=0
    # go install gvisor.dev/gvisor/runsc@<version>). Nomad's default is
    # ["runc", "nvidia"].
    allow_runtimes = ["runc", "runsc"]

    # Not needed by the sandbox job: it binds only a relative path (a
    # directory of its own task), which is always allowed. Leave host
    # volumes off.
    volumes {
      enabled = false
    }

    # The sandbox image is built and loaded on each node (no registry
    # needed); a tag other than latest is never pulled when present.
    gc {
      image       = true
      image_delay = "24h"
    }

    extra_labels = ["job_id", "task_name", "namespace"]
  }
}
