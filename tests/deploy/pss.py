"""The Pod Security Standards' baseline and restricted checks, written from the standard's tables
(https://kubernetes.io/docs/concepts/security/pod-security-standards/, Kubernetes 1.31-1.37), to judge rendered
pod templates independently of how sglab derives its namespace labels (sglab/deploy/namespace.py)."""

from __future__ import annotations

from typing import Any

BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("containers", []), *spec.get("initContainers", []), *spec.get("ephemeralContainers", [])]


def baseline_violations(template: dict[str, Any]) -> list[str]:
    spec, meta = template["spec"], template.get("metadata", {})
    out = [f"spec.{f}" for f in ("hostNetwork", "hostPID", "hostIPC") if spec.get(f)]
    pod_ctx = spec.get("securityContext", {})
    if (pod_ctx.get("windowsOptions") or {}).get("hostProcess"):
        out.append("hostProcess")
    out += [f"volume {v['name']}: hostPath" for v in spec.get("volumes", []) if "hostPath" in v]
    for key, value in (meta.get("annotations") or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
                value == "runtime/default" or value.startswith("localhost/")):
            out.append(f"apparmor annotation {value}")
    for ctx_owner, ctx in [("pod", pod_ctx), *[(c["name"], c.get("securityContext", {})) for c in _containers(spec)]]:
        if (ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"{ctx_owner}: seccomp Unconfined")
        if (ctx.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            out.append(f"{ctx_owner}: appArmorProfile")
        selinux = ctx.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            out.append(f"{ctx_owner}: seLinuxOptions")
    out += [f"sysctl {s['name']}" for s in pod_ctx.get("sysctls", []) if s["name"] not in SAFE_SYSCTLS]
    for container in _containers(spec):
        name, ctx = container["name"], container.get("securityContext", {})
        if ctx.get("privileged"):
            out.append(f"{name}: privileged")
        added = set((ctx.get("capabilities") or {}).get("add", []))
        if added - BASELINE_CAPABILITIES:
            out.append(f"{name}: adds {sorted(added - BASELINE_CAPABILITIES)}")
        if ctx.get("procMount") not in (None, "Default"):
            out.append(f"{name}: procMount")
        out += [f"{name}: hostPort" for p in container.get("ports", []) if p.get("hostPort")]
        for probe in PROBES:
            handler = container.get(probe) or {}
            for kind in ("httpGet", "tcpSocket"):
                if (handler.get(kind) or {}).get("host"):
                    out.append(f"{name}: {probe}.{kind}.host")
    return out


def restricted_violations(template: dict[str, Any]) -> list[str]:
    spec = template["spec"]
    out = baseline_violations(template)
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {volume['name']}: {sorted(kinds - RESTRICTED_VOLUMES)}")
    pod_ctx = spec.get("securityContext", {})
    for container in _containers(spec):
        name, ctx = container["name"], container.get("securityContext", {})
        if ctx.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation not false")
        if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is not True:
            out.append(f"{name}: runAsNonRoot not true")
        if ctx.get("runAsUser", pod_ctx.get("runAsUser")) == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccomp {seccomp}")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):
            out.append(f"{name}: does not drop ALL")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds {sorted(set(caps.get('add', [])) - {'NET_BIND_SERVICE'})}")
    if pod_ctx.get("runAsUser") == 0:
        out.append("pod: runAsUser 0")
    return out


def strictest_level(template: dict[str, Any]) -> str:
    if not restricted_violations(template):
        return "restricted"
    return "baseline" if not baseline_violations(template) else "privileged"


def pod_templates(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(what, pod template) of every workload among rendered objects."""
    out = []
    for obj in objects:
        what = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] in ("Deployment", "Job", "StatefulSet"):
            out.append((what, obj["spec"]["template"]))
        elif obj["kind"] == "CronJob":
            out.append((what, obj["spec"]["jobTemplate"]["spec"]["template"]))
        elif obj["kind"] == "LeaderWorkerSet":
            group = obj["spec"]["leaderWorkerTemplate"]
            out += [(f"{what}/{t}", group[t]) for t in ("leaderTemplate", "workerTemplate")]
    return out
