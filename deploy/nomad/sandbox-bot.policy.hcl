# ACL policy for the sandbox-bot job's workload identity (see
# sandbox-bot.nomad.hcl). Sandboxes run in a namespace of their own
# (deploy/nomad/sandbox.namespace.hcl; SANDBOX_NOMAD_NAMESPACE, default
# "sandbox"), and the bot's job in another ("default" here): the bot's
# alloc-exec reaches sandbox allocations and nothing else. Keep every other
# job out of the sandbox namespace, and the bot's own job too: exec is
# granted per namespace, not per job or command.

namespace "sandbox" {
  # Register, read, stop and purge the sandbox jobs; follow their events,
  # logs and alloc/data/result.json; reach a live run's dev server and
  # screencast (alloc-exec: the bot runs `sandbox-runner pipe` only, but
  # Nomad cannot hold it to that command).
  capabilities = ["submit-job", "read-job", "list-jobs", "read-logs", "read-fs", "alloc-exec"]

  variables {
    # Token Variables, one per sandbox job (nomad/jobs/<job>), which that
    # job's workload identity reads in its own namespace.
    path "nomad/jobs/sandbox-t-*" {
      capabilities = ["write", "read", "destroy", "list"]
    }
  }
}

# The bot's own namespace: its state, shared by every replica. No job
# capability: the bot starts nothing here.
namespace "default" {
  variables {
    # Per-issue locks and pending review batches.
    path "sandbox-bot/locks/*" {
      capabilities = ["write", "read", "destroy", "list"]
    }
    # The run queue under the caps (one Variable, changed with
    # check-and-set) and each queued run's request.
    path "sandbox-bot/queue" {
      capabilities = ["write", "read", "list"]
    }
    path "sandbox-bot/queued/*" {
      capabilities = ["write", "read", "destroy", "list"]
    }
    # The monthly budgets' book when the replicas share no database (one
    # Variable, changed with check-and-set).
    path "sandbox-bot/budget" {
      capabilities = ["write", "read", "list"]
    }
    # Each repository's routine book: the ticks and one-off triggers its
    # routines claimed (one Variable per repository, check-and-set).
    path "sandbox-bot/routines/*" {
      capabilities = ["write", "read", "list"]
    }
    # Plan runs' agent sessions, kept for their execute runs (a head and
    # its chunks per plan, removed after 14 days).
    path "sandbox-bot/session/*" {
      capabilities = ["write", "read", "destroy", "list"]
    }
  }
}

# AllocFS looks up the node of an allocation to reach its client directly.
node {
  policy = "read"
}

# Sandboxes run in their own node pool (deploy/nomad/client.hcl); registering
# a job in a pool needs read on it. The bot's own job stays in "default".
node_pool "sandbox" {
  policy = "read"
}

# Registering a job that mounts a host volume needs the right to mount it:
# the setup cache read-write (SANDBOX_NOMAD_SETUP_CACHE_VOLUME, named as in
# deploy/nomad/client.hcl), the OSV database read-only
# (SANDBOX_NOMAD_OSV_VOLUME). Rename them to the volumes you configure.
host_volume "sandbox-setup-cache" {
  policy = "write"
}

host_volume "sandbox-osv" {
  policy = "read"
}
