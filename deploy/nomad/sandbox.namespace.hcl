# The Nomad namespace sandboxes run in, apart from the bot's own job and
# everything else: the bot's ACL policy (sandbox-bot.policy.hcl) grants
# alloc-exec here only. Create it once, before the bot's first run:
#
#   nomad namespace apply deploy/nomad/sandbox.namespace.hcl
#
# Another name: set SANDBOX_NOMAD_NAMESPACE (server config
# nomad.sandbox_namespace) and rename the policy's namespace block to match.
# Run nothing else here: whatever runs in this namespace, the bot's token can
# exec in.

name        = "sandbox"
description = "sandbox-bot's sandboxes (one batch job per run); nothing else runs here"

# Sandbox jobs use the docker driver only: a job with another driver is
# refused at submission.
capabilities {
  enabled_task_drivers = ["docker"]
}

# Nomad Enterprise can also pin the namespace to the sandbox node pool:
#
#   node_pool_config {
#     default = "sandbox"
#     allowed = ["sandbox"]
#   }
