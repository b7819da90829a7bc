#!/usr/bin/env bash
# tests/fleet/run.sh - validate contrib/kubernetes and contrib/nomad offline.
#
# kubeconform is not in Debian, nor is Nomad; the validators come from the
# npm registry (pinned in package.json), installed once into a cache
# directory, and need no network afterwards:
#   - Kubernetes: every object of contrib/kubernetes/*.yaml (YAML read by
#     Debian's python3-yaml) against kubernetes-models' validators, generated
#     from the Kubernetes OpenAPI schemas (types, required fields, enums,
#     formats; unknown fields are not flagged).
#   - Nomad: contrib/nomad/*.hcl parsed by HashiCorp's HCL2 parser
#     (@cdktf/hcl2json) and checked against nomad-job.schema.json, the part
#     of Nomad's job specification the job uses (unknown keys fail).
# Then mutated copies must FAIL (so the validators bite), and the recipes
# must agree with the systemd unit (the same capabilities) and with each
# other (the socket path); the MCP fleet's pod must hold together (its
# front and daemon, probes, grace period, Service). Exit 0 when all holds; the last line a summary.
#
#   FLEET_CACHE=DIR   where node_modules goes (default build-fleet)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cache=${FLEET_CACHE:-$src/build-fleet}
py=/usr/bin/python3

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok      $*"; }
bad() { fail=$((fail + 1)); echo "FAIL    $*"; }
summary() {
    echo "fleet test: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit $?
}

mkdir -p "$cache"
cp "$here/package.json" "$here/validate.mjs" "$here/nomad-job.schema.json" "$cache/"
if [ ! -d "$cache/node_modules/kubernetes-models" ] || [ ! -d "$cache/node_modules/@cdktf/hcl2json" ]; then
    if (cd "$cache" && npm install --no-audit --no-fund --loglevel=error) >"$cache/npm.log" 2>&1; then
        ok "validators installed (npm: kubernetes-models, @cdktf/hcl2json, ajv)"
    else
        bad "npm install (log follows)"
        cat "$cache/npm.log"
        summary
    fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
yaml2json() { # FILE.yaml OUT.json [MUTATION]
    "$py" - "$1" "$2" "${3:-}" <<'PY'
import json, sys, yaml
src, out, mutation = sys.argv[1:4]
docs = [d for d in yaml.safe_load_all(open(src)) if d]
for d in docs:
    if mutation == "port-as-string" and d["kind"] == "DaemonSet":
        d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "9464"
    if mutation == "no-selector" and d["kind"] == "Deployment":
        del d["spec"]["selector"]
    if mutation == "probe-port-as-list" and d["kind"] == "Deployment":
        d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = [8080]
json.dump(docs, open(out, "w"))
PY
}

# ---- Kubernetes ------------------------------------------------------------------
for f in "$src"/contrib/kubernetes/*.yaml; do
    b=$(basename "$f" .yaml)
    if ! yaml2json "$f" "$work/$b.json"; then
        bad "$b.yaml is not YAML"
        continue
    fi
    if out=$(cd "$cache" && node validate.mjs k8s "$work/$b.json" 2>&1); then
        ok "$b.yaml: $(echo "$out" | grep -c '^valid') objects valid"
    else
        bad "$b.yaml:"
        echo "$out"
    fi
done
yaml2json "$src/contrib/kubernetes/toolexecd-daemonset.yaml" "$work/m1.json" port-as-string
yaml2json "$src/contrib/kubernetes/agent-deployment.yaml" "$work/m2.json" no-selector
yaml2json "$src/contrib/kubernetes/toolexecd-mcp-fleet.yaml" "$work/m3.json" probe-port-as-list
for m in m1 m2 m3; do
    if (cd "$cache" && node validate.mjs k8s "$work/$m.json") >"$work/$m.out" 2>&1; then
        bad "a broken manifest ($m) passed the validator"
    else
        ok "a broken manifest is refused: $(grep '^invalid' "$work/$m.out" | head -1)"
    fi
done

# ---- Nomad -----------------------------------------------------------------------
for f in "$src"/contrib/nomad/*.hcl; do
    if out=$(cd "$cache" && node validate.mjs nomad "$f" 2>&1); then
        ok "$out"
    else
        bad "$(basename "$f"):"
        echo "$out"
    fi
done
sed 's/type        = "system"/type        = "service"/' "$src/contrib/nomad/toolexecd.nomad.hcl" >"$work/n1.hcl"
sed 's/cap_add  =/cap_ad =/' "$src/contrib/nomad/toolexecd.nomad.hcl" >"$work/n2.hcl"
sed 's/^job "toolexecd" {/job "toolexecd" {{/' "$src/contrib/nomad/toolexecd.nomad.hcl" >"$work/n3.hcl"
for m in n1 n2 n3; do
    if (cd "$cache" && node validate.mjs nomad "$work/$m.hcl") >"$work/$m.out" 2>&1; then
        bad "a broken job ($m) passed the validator"
    else
        ok "a broken job is refused: $(head -c 160 "$work/$m.out")"
    fi
done

# ---- the recipes agree with the unit and with each other -----------------------------
if "$py" - "$src" <<'PY'; then
import json, re, subprocess, sys, yaml
src = sys.argv[1]
unit = open(src + "/contrib/systemd/toolexecd.service.in").read()
caps = set(re.search(r"^CapabilityBoundingSet=(.*)$", unit, re.M).group(1).split())
caps = {c.removeprefix("CAP_") for c in caps}
docs = {d["kind"]: d for f in ("toolexecd-daemonset", "agent-deployment")
        for d in yaml.safe_load_all(open(f"{src}/contrib/kubernetes/{f}.yaml")) if d}
ds = docs["DaemonSet"]["spec"]["template"]["spec"]
c = ds["containers"][0]
sc = c["securityContext"]
assert set(sc["capabilities"]["add"]) == caps, (sc["capabilities"]["add"], caps)
assert sc["capabilities"]["drop"] == ["ALL"]
assert sc.get("privileged") is False and sc.get("allowPrivilegeEscalation") is False
sock = next(a.split("=", 1)[1] for a in c["args"] if a.startswith("--socket="))
host = {v["name"]: v["hostPath"]["path"] for v in ds["volumes"] if "hostPath" in v}
mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
assert any(sock.startswith(mounts[n] + "/") and host[n] == mounts[n] for n in host), (sock, host)
# a configMap volume is 0777: toolexecd loads it only from a read-only mount
cms = {v["name"] for v in ds["volumes"] if "configMap" in v}
assert all(m.get("readOnly") is True for m in c["volumeMounts"] if m["name"] in cms), cms
ag = docs["Deployment"]["spec"]["template"]["spec"]
env = {e["name"]: e["value"] for e in ag["containers"][0]["env"]}
assert env["TOOLEXECD_SOCKET"] == sock
assert [v["hostPath"]["path"] for v in ag["volumes"]] == list(host.values())
uid = ag["securityContext"]["runAsUser"]
tools = docs["ConfigMap"]["data"]
assert all(uid in json.loads(t)["allow_uids"] for t in tools.values())
hcl = open(src + "/contrib/nomad/toolexecd.nomad.hcl").read()
nomad_caps = set(json.loads(re.search(r"cap_add\s*=\s*(\[.*?\])", hcl).group(1)))
assert {x.upper() for x in nomad_caps} == caps, nomad_caps
assert f'"--socket={sock}"' in hcl
PY
    ok "the DaemonSet and the Nomad job hold the unit's capabilities; socket path, hostPath and allow_uids agree; the configMap is mounted read-only"
else
    bad "the recipes disagree (see the assertion above)"
fi

# ---- the MCP fleet: its pod holds together -------------------------------------------
# fleet_check FILE [MUTATION]: the front reaches the daemon's socket through
# their shared emptyDir, the probes name the front's port and its /ready and
# /healthz, the grace period outlasts preStop and the drain, the daemon is a
# sidecar (stopped after the front) with the unit's capabilities, the tools
# allow the front's uid, and the Service selects the pods on the port.
fleet_check() {
    "$py" - "$src" "$1" "${2:-}" <<'PY'
import json, re, sys, yaml
src, path, mutation = sys.argv[1:4]
docs = {d["kind"]: d for d in yaml.safe_load_all(open(path)) if d}
pod = docs["Deployment"]["spec"]["template"]
spec = pod["spec"]
if mutation == "short-grace":
    spec["terminationGracePeriodSeconds"] = 20
if mutation == "ready-path":
    spec["containers"][0]["readinessProbe"]["httpGet"]["path"] = "/mcp"
if mutation == "plain-init":
    del spec["initContainers"][0]["restartPolicy"]
unit = open(src + "/contrib/systemd/toolexecd.service.in").read()
caps = {c.removeprefix("CAP_") for c in
        re.search(r"^CapabilityBoundingSet=(.*)$", unit, re.M).group(1).split()}
daemon, = spec["initContainers"]
front, = spec["containers"]
assert daemon.get("restartPolicy") == "Always", "the daemon is not a sidecar"
assert set(daemon["securityContext"]["capabilities"]["add"]) == caps
assert front["securityContext"]["capabilities"]["drop"] == ["ALL"]
assert "add" not in front["securityContext"]["capabilities"]
arg = lambda c, k: next(a.split("=", 1)[1] for a in c["args"] if a.startswith(k + "="))
sock = arg(daemon, "--socket")
assert arg(front, "--socket") == sock, (arg(front, "--socket"), sock)
mounts = lambda c: {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
shared = [n for n in mounts(front) if n in mounts(daemon)
          and mounts(front)[n] == mounts(daemon)[n] and sock.startswith(mounts(front)[n] + "/")]
vols = {v["name"]: v for v in spec["volumes"]}
assert shared and "emptyDir" in vols[shared[0]], ("socket not in a shared emptyDir", shared)
assert front["args"][1] == "mcp", front["args"]
listen_port = int(arg(front, "--listen").rsplit(":", 1)[1])
ports = {p["name"]: p["containerPort"] for p in front["ports"]}
for probe, want in (("readinessProbe", "/ready"), ("livenessProbe", "/healthz")):
    g = front[probe]["httpGet"]
    assert g["path"] == want, (probe, g)
    assert ports.get(g["port"], g["port"]) == listen_port, (probe, g, listen_port)
drain = int(arg(front, "--drain-timeout"))
pre = front["lifecycle"]["preStop"]["exec"]["command"]
pre_s = int(pre[1]) if pre[0] == "sleep" else 0
assert spec["terminationGracePeriodSeconds"] > pre_s + drain, \
    ("grace period", spec["terminationGracePeriodSeconds"], pre_s, drain)
uid = front["securityContext"]["runAsUser"]
cm = docs["ConfigMap"]
assert any(v.get("configMap", {}).get("name") == cm["metadata"]["name"] for v in vols.values())
assert all(uid in json.loads(t)["allow_uids"] for t in cm["data"].values())
svc = docs["Service"]["spec"]
labels = pod["metadata"]["labels"]
assert all(labels.get(k) == v for k, v in svc["selector"].items()), (svc["selector"], labels)
assert docs["Deployment"]["spec"]["selector"]["matchLabels"] == svc["selector"]
assert all(ports.get(p["targetPort"], p["targetPort"]) == listen_port for p in svc["ports"])
assert "sessionAffinity" not in svc or svc["sessionAffinity"] == "None"
PY
}
fleet=$src/contrib/kubernetes/toolexecd-mcp-fleet.yaml
if fleet_check "$fleet"; then
    ok "the MCP fleet: socket shared through an emptyDir, probes on /ready and /healthz, grace > preStop + drain, the daemon a sidecar, Service and pods agree"
else
    bad "the MCP fleet's pod does not hold together (see the assertion above)"
fi
for m in short-grace ready-path plain-init; do
    if fleet_check "$fleet" "$m" 2>"$work/$m.out"; then
        bad "a broken MCP fleet ($m) passed the check"
    else
        ok "a broken MCP fleet is refused: $m: $(tail -1 "$work/$m.out")"
    fi
done
summary
