// tests/fleet/validate.mjs - validate the fleet recipes offline.
//   node validate.mjs k8s FILE.json...   each file a JSON array of Kubernetes
//                                        objects (YAML converted by run.sh)
//   node validate.mjs nomad FILE.hcl...  Nomad job files
// Kubernetes: kubernetes-models' validators, generated from the Kubernetes
// OpenAPI schemas (types, required fields, enums, formats; unknown fields
// are not flagged). Nomad: HCL2 parsed by HashiCorp's hcl2json, checked
// against nomad-job.schema.json (ajv). Prints one line per object; exit 1
// on any invalid one.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const [mode, ...files] = process.argv.slice(2);
let bad = 0;

async function k8s(file) {
  for (const obj of JSON.parse(fs.readFileSync(file, "utf8"))) {
    const where = `${path.basename(file)}: ${obj.kind} ${obj.metadata?.name}`;
    const [group, version] = obj.apiVersion.includes("/") ? obj.apiVersion.split("/") : ["", obj.apiVersion];
    let mod;
    try {
      mod = await import(group ? `kubernetes-models/${group}/${version}` : `kubernetes-models/${version}`);
    } catch (e) {
      console.log(`invalid ${where}: unknown apiVersion ${obj.apiVersion}`);
      bad++;
      continue;
    }
    const Kind = mod[obj.kind];
    if (!Kind) {
      console.log(`invalid ${where}: no kind ${obj.kind} in ${obj.apiVersion}`);
      bad++;
      continue;
    }
    try {
      new Kind(obj).validate();
      console.log(`valid   ${where}`);
    } catch (e) {
      console.log(`invalid ${where}: ${e.message}`);
      bad++;
    }
  }
}

async function nomad(file) {
  const { parse } = (await import("@cdktf/hcl2json")).default ?? (await import("@cdktf/hcl2json"));
  const Ajv = (await import("ajv/dist/2020.js")).default;
  const schema = JSON.parse(fs.readFileSync(path.join(here, "nomad-job.schema.json"), "utf8"));
  const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
  let json;
  try {
    json = await parse(path.basename(file), fs.readFileSync(file, "utf8"));
  } catch (e) {
    console.log(`invalid ${path.basename(file)}: HCL: ${e.message ?? e}`);
    bad++;
    return;
  }
  if (validate(json)) {
    console.log(`valid   ${path.basename(file)}: job ${Object.keys(json.job).join(",")}`);
  } else {
    console.log(`invalid ${path.basename(file)}: ${validate.errors.map((e) => `${e.instancePath} ${e.message}`).join("; ")}`);
    bad++;
  }
}

for (const f of files) await (mode === "k8s" ? k8s(f) : nomad(f));
process.exit(bad ? 1 : 0);
