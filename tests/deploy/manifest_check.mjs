// Checks Kubernetes manifests offline, as `kubectl apply` would read them:
// YAML 1.1 (what kubectl's parser speaks: 0400 is octal, yes is true,
// duplicate keys are an error), every document an object of a known kind
// and API version, valid against that version's schema (kubernetes-models:
// types, required fields, formats), and with no field the API version does
// not define (the schemas of kubernetes-models allow unknown fields, so a
// misspelt optional field would pass them; the field lists come from the
// generated models of @kubernetes/client-node).
//
// checkManifest(text, file) returns the problems found, each a line that
// names the file, the document and the field.
import { parseAllDocuments } from 'yaml';
import * as fieldModels from '@kubernetes/client-node/dist/gen/models/all.js';

// How kubectl reads YAML (sigs.k8s.io/yaml over go-yaml v2: YAML 1.1).
export const YAML_OPTIONS = { version: '1.1', uniqueKeys: true, prettyErrors: false };

const PRIMITIVES = new Set(['string', 'number', 'boolean', 'Date', 'any', 'IntOrString', 'object']);

// The kubernetes-models module of an apiVersion: "apps/v1" -> apps/v1,
// "v1" (the core group) -> v1.
async function schemaModels(apiVersion) {
  try {
    return await import(`kubernetes-models/${apiVersion}`);
  } catch {
    return null;
  }
}

// The generated model of a kind: apps/v1 DaemonSet -> V1DaemonSet.
function fieldModelName(apiVersion, kind) {
  const version = apiVersion.split('/').pop();
  return version.charAt(0).toUpperCase() + version.slice(1) + kind;
}

// Every field of `value` that `type` does not define, walking the fields it
// does define.
function unknownFields(value, type, path, found) {
  if (value === null || typeof value !== 'object' || PRIMITIVES.has(type)) return;
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    if (Array.isArray(value)) value.forEach((item, i) => unknownFields(item, array[1], `${path}[${i}]`, found));
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    for (const [key, item] of Object.entries(value)) unknownFields(item, map[1], `${path}.${key}`, found);
    return;
  }
  const model = fieldModels[type];
  if (!model || Array.isArray(value)) return;
  const fields = new Map(model.attributeTypeMap.map((field) => [field.baseName, field.type]));
  for (const [key, item] of Object.entries(value)) {
    if (!fields.has(key)) {
      found.push(`${path}.${key}: unknown field (${type} has no field "${key}")`);
    } else {
      unknownFields(item, fields.get(key), `${path}.${key}`, found);
    }
  }
}

export async function checkManifest(text, file) {
  const problems = [];
  const documents = parseAllDocuments(text, YAML_OPTIONS);
  if (!Array.isArray(documents)) {
    return [`${file}: not a YAML stream`];
  }
  let index = 0;
  for (const document of documents) {
    index += 1;
    const where = `${file} document ${index}`;
    const errors = [...document.errors, ...document.warnings];
    if (errors.length > 0) {
      problems.push(...errors.map((error) => `${where}: YAML: ${error.message.split('\n')[0]}`));
      continue;
    }
    const object = document.toJS({ maxAliasCount: 100 });
    if (object === null || object === undefined) continue;
    if (typeof object !== 'object' || Array.isArray(object)) {
      problems.push(`${where}: not a Kubernetes object (a mapping with apiVersion and kind)`);
      continue;
    }
    const { apiVersion, kind } = object;
    if (typeof apiVersion !== 'string' || typeof kind !== 'string') {
      problems.push(`${where}: apiVersion and kind are required strings`);
      continue;
    }
    const named = `${where} (${kind} ${object.metadata?.name ?? '<no name>'})`;
    const schemas = await schemaModels(apiVersion);
    const Schema = schemas?.[kind];
    const modelName = fieldModelName(apiVersion, kind);
    if (typeof Schema !== 'function' || !fieldModels[modelName]) {
      problems.push(`${named}: unknown kind ${kind} of apiVersion ${apiVersion}`);
      continue;
    }
    try {
      new Schema(object).validate();
    } catch (error) {
      problems.push(`${named}: ${error.message}`);
    }
    const unknown = [];
    unknownFields(object, modelName, '', unknown);
    problems.push(...unknown.map((problem) => `${named}: ${problem.slice(1)}`));
  }
  return problems;
}
