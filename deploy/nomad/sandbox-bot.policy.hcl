# ACL policy for the sandbox-bot job's workload identity (see
# sandbox-bot.nomad.hcl). Narrow it to the namespace the sandboxes run in.

namespace "default" {
  # Register, read, stop and purge the sandbox jobs; follow their events,
  # logs and alloc/data/result.json; reach a live run's dev server and
  # screencast (alloc-exec of `sandbox-runner pipe`, nothing else).
  capabilities = ["submit-job", "read-job", "list-jobs", "read-logs", "read-fs", "alloc-exec"]

  variables {
    # Token Variables, one per sandbox job, readable by that job alone.
    path "nomad/jobs/sandbox-t-*" {
      capabilities = ["write", "read", "destroy", "list"]
    }
    # Per-issue locks shared by every bot replica.
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
