# The sandbox job, in HCL: the same job dispatch/nomad builds in Go for one
# run (compare dispatch/nomad/testdata/execute.golden.json, reviewed field by
# field). The bot never reads this file; it is here to review the job, and to
# run one sandbox by hand when debugging:
#
#   nomad var put -namespace sandbox nomad/jobs/sandbox-t-0a1b2c3d-execute token=@token.txt
#   nomad job run \
#     -var task_id=T-0A1B2C3D -var mode=execute \
#     -var work_order_b64="$(base64 -w0 work-order.json)" \
#     deploy/nomad/sandbox.nomad.hcl
#
# Client requirements (deploy/nomad/client.hcl): the docker plugin with
# allow_privileged = true (or allow_caps = ["all"] for the caps profile, and
# also allow_runtimes listing "runsc" for the gvisor profile) and
# client.max_kill_timeout >= 60s. Relative `volumes` need no
# docker.volumes.enabled: they bind directories of the task itself.

variable "image" {
  type        = string
  default     = "sandbox-bot/sandbox:local"
  description = "Sandbox image reference (SANDBOX_IMAGE)."
}

variable "task_id" {
  type        = string
  description = "Task id, T- plus 8 upper hex characters."
}

variable "mode" {
  type    = string
  default = "execute"
}

variable "work_order_b64" {
  type        = string
  description = "The work order JSON, base64-encoded, with output_dir /alloc/data and token_file /secrets/token."
}

variable "max_run_duration" {
  type        = string
  default     = "75m"
  description = "timeout_minutes of the work order plus 15m of grace."
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

# Sandboxes run in a namespace of their own (deploy/nomad/sandbox.namespace.hcl),
# where the bot's ACL policy grants alloc-exec, and nowhere else: their token
# Variable is nomad/jobs/<job> in that namespace (nomad var put -namespace).
variable "namespace" {
  type    = string
  default = "sandbox"
}

# Sandboxes get nodes of their own (deploy/nomad/client.hcl puts sandbox
# clients in this pool); the bot and everything else stay in "default", so a
# sandbox that escapes its container finds no App key or other job beside it.
variable "node_pool" {
  type    = string
  default = "sandbox"
}

job "sandbox" {
  # The bot's job ids are sandbox-<task id, lower case>-<mode>; registration
  # is create-only (EnforceIndex with modify index 0), so one id is one run.
  id          = "sandbox-${lower(var.task_id)}-${var.mode}"
  name        = "sandbox-${lower(var.task_id)}-${var.mode}"
  namespace   = var.namespace
  type        = "batch"
  priority    = 50
  datacenters = var.datacenters
  node_pool   = var.node_pool

  # Only clients whose docker plugin allows privileged containers. The caps
  # profile drops this constraint (there is no attribute for allow_caps);
  # the gvisor profile has instead:
  #   constraint {
  #     attribute = "${attr.driver.docker.runtimes}"
  #     operator  = "set_contains"
  #     value     = "runsc"
  #   }
  constraint {
    attribute = "${attr.driver.docker.privileged.enabled}"
    operator  = "="
    value     = "true"
  }

  meta {
    sandbox_task_id   = var.task_id
    sandbox_mode      = var.mode
    sandbox_attempt   = "1"
    sandbox_isolation = "privileged"
    # The bot also sets sandbox_repo, sandbox_number,
    # sandbox_installation_id, sandbox_delivery_id and sandbox_head_sha.
  }

  group "sandbox" {
    count = 1

    # The bot decides about retries (continue mode, a bounded number of
    # times); Nomad must never restart the same work from scratch.
    restart {
      attempts = 0
      mode     = "fail"
    }

    reschedule {
      attempts  = 0
      unlimited = false
    }

    # A node cut off from the servers stops its sandbox after 2m (it pushes
    # on SIGTERM) and the allocation is not replaced: the bot sees it lost
    # and resumes the work in continue mode.
    disconnect {
      stop_on_client_after = "2m"
      replace              = false
    }

    # Backstop: the runner stops itself at timeout_minutes.
    max_run_duration = var.max_run_duration

    # A scheduling hint for the inner daemon's images and the workspace.
    ephemeral_disk {
      size = 20480
    }

    # The setup cache (SANDBOX_NOMAD_SETUP_CACHE_VOLUME): the host volume of
    # deploy/nomad/client.hcl, mounted whole; the sandbox's init binds the
    # run's repository's directory of it at /cache/setup and unmounts the
    # rest before the runner starts. Coding modes only.
    volume "setup-cache" {
      type      = "host"
      source    = "sandbox-setup-cache"
      read_only = false
    }

    task "sandbox" {
      driver = "docker"

      config {
        image = var.image

        # privileged profile. The caps profile uses instead:
        #   cap_add      = ["all"]
        #   cap_drop     = ["sys_resource"]
        #   security_opt = ["seccomp=unconfined", "apparmor=unconfined"]
        # The gvisor profile: the caps lines, and gVisor's runtime (task
        # mode too):
        #   runtime      = "runsc"
        # Task mode uses neither, and no volume: its init starts as root
        # (the task's user = "0:0") with the capabilities of its fence and
        # of its drop to the sandbox user alone, and the agent has none:
        #   cap_drop     = ["all"]
        #   cap_add      = ["net_admin", "net_raw", "setuid", "setgid", "setpcap", "kill"]
        #   security_opt = ["no-new-privileges"]
        # with SANDBOX_TASK_FENCE = "1000:1000" in env.
        privileged = true

        # The inner dockerd's storage: a directory of the task, removed with
        # the allocation. Never an anonymous volume, which would outlive it.
        volumes = ["docker-data:/var/lib/docker"]

        # Dotted keys need the list-of-maps form.
        labels = [{
          "sandbox-bot.task" = "${NOMAD_META_sandbox_task_id}"
          "sandbox-bot.mode" = "${NOMAD_META_sandbox_mode}"
        }]
      }

      volume_mount {
        volume      = "setup-cache"
        destination = "/cache/setup-node"
        read_only   = false
      }

      env {
        SANDBOX_WORK_ORDER = "/local/work-order.json"
        SANDBOX_DIND       = "1" # "0" in task mode: no inner daemon
        SANDBOX_ISOLATION  = "privileged"
        SANDBOX_TASK_ID    = var.task_id
        # Fenced off for every process and inner container (besides
        # link-local): the Nomad API and the bot (the bot fills them from
        # NOMAD_ADDR, SANDBOX_LISTEN and deny_networks), and this node's
        # own address, every port (the host wall: the Nomad client's API,
        # Consul's agent, anything bound to all addresses). Every mode,
        # task mode too.
        SANDBOX_DENY_NETS = "${attr.unique.network.ip-address}"
        # The init fences off its default route's gateway and
        # host.docker.internal too; the host ports the operator lists in
        # SANDBOX_HOST_ALLOW pass before every deny, e.g.
        # SANDBOX_ALLOW_HOSTS = "${attr.unique.network.ip-address}:3000"
        SANDBOX_DENY_HOST = "1"
        # The setup cache's bounds: one repository, and the whole node.
        SANDBOX_SETUP_CACHE_MAX_SIZE      = "2147483648"
        SANDBOX_SETUP_CACHE_NODE_MAX_SIZE = "21474836480"
      }

      # The work order. base64 keeps issue text such as "{{" out of the
      # template language. Like the token, it is the runner's alone: the
      # agent runs as the image's sandbox user (1000) and cannot read it.
      template {
        data        = "{{ base64Decode \"${var.work_order_b64}\" }}"
        destination = "local/work-order.json"
        change_mode = "noop"
        perms       = "0400"
        uid         = 1001 # the image's runner user (dispatch.RunnerUID)
        gid         = 1001
      }

      # The repository token, from the Variable the bot writes and refreshes
      # before its one-hour expiry. nomad/jobs/<job id> is readable by the
      # job's workload identity without an ACL policy. change_mode noop: the
      # runner's git credential helper reads the file on every use.
      template {
        data        = "{{ with nomadVar \"nomad/jobs/sandbox-${lower(var.task_id)}-${var.mode}\" }}{{ .token }}{{ end }}"
        destination = "secrets/token"
        change_mode = "noop"
        perms       = "0400"
        uid         = 1001 # the image's runner user (dispatch.RunnerUID)
        gid         = 1001
      }

      # The model gateway's providers and keys (present when the bot serves
      # providers), from the same Variable: root's, 0400, read once by the
      # sandbox's init, which hides the directory and serves the keys to
      # the agent's model requests without the agent ever seeing them.
      template {
        data        = "{{ with nomadVar \"nomad/jobs/sandbox-${lower(var.task_id)}-${var.mode}\" }}{{ .gateway }}{{ end }}"
        destination = "secrets/gateway/providers.json"
        change_mode = "noop"
        perms       = "0400"
        uid         = 0
        gid         = 0
      }

      resources {
        cpu    = 2000 # MHz; .sandbox.yml resources.cpu within the server's max_cpu
        memory = 4096 # MB;  resources.memory_mb within max_memory_mb
      }

      # SIGTERM, then this long for the runner to commit, push and write its
      # interrupted receipt before SIGKILL. Needs client max_kill_timeout >= 60s.
      kill_signal  = "SIGTERM"
      kill_timeout = "60s"

      logs {
        max_files     = 5
        max_file_size = 20
      }
    }
  }
}
