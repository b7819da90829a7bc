# toolexecd on every Nomad client: a system job (one allocation per node),
# the socket in a host directory that agent jobs on the node mount.
# See ../kubernetes/README.md for why a per-node socket and not a service.
job "toolexecd" {
  type        = "system"
  datacenters = ["*"]

  group "toolexecd" {
    restart {
      attempts = 10
      interval = "5m"
      delay    = "5s"
      mode     = "delay"
    }

    network {
      port "metrics" {
        static = 9464
      }
    }

    service {
      name     = "toolexecd-metrics"
      provider = "nomad"
      port     = "metrics"
      tags     = ["prometheus"]
    }

    task "toolexecd" {
      driver = "docker"

      config {
        image = "toolexecd:0.1.0"
        args = [
          "--socket=/run/toolexecd/toolexecd.sock",
          "--socket-mode=0666",
          "--tools=/local/tools.d",
          "--work-dir=/run/toolexecd-work",
          "--log-format=json",
          "--metrics-listen=0.0.0.0:9464",
          "--shutdown-timeout=20",
        ]
        ports = ["metrics"]
        # the capabilities of contrib/systemd/toolexecd.service, no more
        cap_drop = ["all"]
        cap_add  = ["sys_admin", "setuid", "setgid", "chown", "kill", "dac_override"]
        # the default AppArmor profile denies mount(2), which each call's
        # /proc needs
        security_opt = ["apparmor=unconfined", "no-new-privileges"]
        readonly_rootfs = true
        # the node's socket directory, shared with agent jobs
        volumes = ["/run/toolexecd:/run/toolexecd"]
        # 1777, as /tmp: toolexecd works in toolexecd-0 (0711) inside it
        mount {
          type   = "tmpfs"
          target = "/run/toolexecd-work"
          tmpfs_options {
            size = 1073741824
          }
        }
      }

      template {
        destination = "local/tools.d/cat.json"
        data        = <<-JSON
          {"name": "cat", "description": "Returns its arguments.",
           "schema": {"type": "object"}, "command": ["/bin/cat"], "protocol": "plain",
           "timeout_ms": 5000, "allow_uids": [10001]}
        JSON
        change_mode   = "signal"
        change_signal = "SIGHUP"
      }

      kill_timeout = "30s"

      resources {
        cpu    = 200
        memory = 2048
      }
    }
  }
}
