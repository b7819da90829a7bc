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
# other (the socket path). Exit 0 when all holds; the last line a summary.
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
for m in m1 m2; do
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
summary
