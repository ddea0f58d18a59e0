# sandbox-bot as a Nomad service job. The bot talks to Nomad through the Task
# API socket with its workload identity (no long-lived NOMAD_TOKEN): attach
# deploy/nomad/sandbox-bot.policy.hcl to this job once,
#
#   nomad namespace apply deploy/nomad/sandbox.namespace.hcl
#   nomad acl policy apply -namespace default -job sandbox-bot \
#     sandbox-bot deploy/nomad/sandbox-bot.policy.hcl
#
# and store the env file `sandbox-bot setup` wrote (the App's id, slug,
# private key, webhook secret, OAuth client) in the Variable only this job
# reads:
#
#   nomad var put nomad/jobs/sandbox-bot env_file=@sandbox-bot.env
#
# Two replicas are safe: submission is create-only and the per-issue lock is
# a Variable written with check-and-set, so a webhook delivered to both
# starts one sandbox.
#
# The replicas share one PostgreSQL database for what people read after the
# fact (receipts, the dashboard, every run's transcript): put its URL in the
# same Variable, and each replica's env file gets SANDBOX_DATABASE_URL:
#
#   nomad var put nomad/jobs/sandbox-bot env_file=@sandbox-bot.env \
#     database_url='postgres://sandbox_bot:PASSWORD@db.internal:5432/sandbox_bot'
#
# Without it each replica keeps its own SQLite under /alloc/data, and sees
# only the runs it followed.

variable "image" {
  type    = string
  default = "sandbox-bot/bot:local"
}

variable "sandbox_image" {
  type    = string
  default = "sandbox-bot/sandbox:local"
}

variable "isolation" {
  type    = string
  default = "privileged" # or "caps"
}

# Where sandboxes run (deploy/nomad/sandbox.namespace.hcl): never this job's
# own namespace, since the bot's policy grants alloc-exec there.
variable "sandbox_namespace" {
  type    = string
  default = "sandbox"
}

job "sandbox-bot" {
  type        = "service"
  datacenters = ["*"]
  # The bot holds the App's private key: it never shares a node with a
  # sandbox, which run in their own pool (nomad.node_pool in the server
  # config, default "sandbox"; deploy/nomad/client.hcl).
  node_pool = "default"

  group "bot" {
    count = 2

    network {
      port "http" {
        to = 8080
      }
      # Dashboard, /metrics and detailed /readyz: for your monitoring only,
      # never routed from the internet.
      port "admin" {
        to = 9090
      }
    }

    service {
      name     = "sandbox-bot"
      provider = "nomad"
      port     = "http"
      tags     = ["github-webhook"]

      check {
        name     = "healthz"
        type     = "http"
        path     = "/healthz"
        interval = "10s"
        timeout  = "2s"
      }
    }

    service {
      name     = "sandbox-bot-admin"
      provider = "nomad"
      port     = "admin"
      tags     = ["metrics"]
    }

    update {
      max_parallel     = 1
      health_check     = "checks"
      min_healthy_time = "10s"
      auto_revert      = true
    }

    task "bot" {
      driver = "docker"

      config {
        image = var.image
        ports = ["http", "admin"]
      }

      # NOMAD_TOKEN in the environment is this task's workload identity;
      # the attached policy gives it what the backend needs.
      identity {
        env = true
      }

      env {
        SANDBOX_LISTEN    = ":8080"
        # Inside the container loopback would be unreachable; the admin port
        # is mapped above and must stay off the public network.
        SANDBOX_ADMIN_LISTEN = ":9090"
        SANDBOX_BACKEND   = "nomad"
        SANDBOX_IMAGE     = var.sandbox_image
        SANDBOX_ISOLATION = var.isolation
        SANDBOX_DATA_DIR  = "/alloc/data"
        NOMAD_ADDR        = "unix://${NOMAD_SECRETS_DIR}/api.sock"
        # The bot's own Variables (locks, queue, sessions) stay in this
        # job's namespace (NOMAD_NAMESPACE, which Nomad sets for the task);
        # sandboxes go to theirs.
        SANDBOX_NOMAD_NAMESPACE = var.sandbox_namespace
        # The bot reads the App's credentials from this file itself (its
        # private key is one double-quoted value); they never become part
        # of the task's environment.
        SANDBOX_BOT_ENV_FILE  = "${NOMAD_SECRETS_DIR}/sandbox-bot.env"
      }

      # The env file `sandbox-bot setup` wrote, from the job's own Variable,
      # and the shared database's URL when the Variable has one. The bot
      # process reads it: if the bot image does not run as root, add uid/gid
      # of its user here.
      template {
        data        = <<EOT
{{ with nomadVar "nomad/jobs/sandbox-bot" }}{{ .env_file }}
{{ if .database_url.Value }}SANDBOX_DATABASE_URL="{{ .database_url }}"
{{ end }}{{ end }}
EOT
        destination = "secrets/sandbox-bot.env"
        change_mode = "restart"
        perms       = "0400"
        # The bot's image runs as its own non-root account (deploy/bot).
        uid = 65532
        gid = 65532
      }

      resources {
        cpu    = 500
        memory = 256
      }

      # Let in-flight webhooks drain; runs keep going in their own jobs.
      kill_timeout = "30s"
    }
  }
}
