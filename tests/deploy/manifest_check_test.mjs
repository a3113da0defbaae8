// What the manifest check must refuse, each named in its report, and how it
// reads YAML (as kubectl does).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { YAML_OPTIONS, checkManifest } from './manifest_check.mjs';

const POD = (spec) => `apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
${spec}`;

const CONTAINER = `  containers:
    - name: c
      image: debian:12
`;

async function expectProblem(text, named) {
  const problems = await checkManifest(text, 'test.yaml');
  assert.ok(
    problems.some((problem) => problem.includes(named)),
    `expected a problem naming ${JSON.stringify(named)}, got ${JSON.stringify(problems)}`,
  );
}

test('a valid manifest passes', async () => {
  assert.deepEqual(await checkManifest(POD(CONTAINER), 'test.yaml'), []);
});

test('YAML is read as kubectl reads it: 1.1 octals and booleans', () => {
  assert.equal(parse('mode: 0400', YAML_OPTIONS).mode, 256);
  assert.equal(parse('flag: yes', YAML_OPTIONS).flag, true);
});

test('a misspelt optional field is reported with its path', async () => {
  await expectProblem(POD(CONTAINER + '  restartPolicyy: Never\n'), 'spec.restartPolicyy: unknown field');
  await expectProblem(
    POD(CONTAINER + '      volumeMount: []\n'),
    'spec.containers[0].volumeMount: unknown field (V1Container',
  );
});

test('a field of the wrong type is reported', async () => {
  await expectProblem(POD(CONTAINER + '  hostNetwork: "yes please"\n'), 'hostNetwork must be boolean');
});

test('a missing required field is reported', async () => {
  await expectProblem(POD('  containers:\n    - image: debian:12\n'), 'containers/0 must have required property name');
});

test('unknown kinds and API versions are reported', async () => {
  await expectProblem('apiVersion: v1\nkind: Podd\nmetadata: {name: p}\n', 'unknown kind Podd of apiVersion v1');
  await expectProblem(
    'apiVersion: storage.k8s.io/v9\nkind: CSIDriver\nmetadata: {name: d}\n',
    'unknown kind CSIDriver of apiVersion storage.k8s.io/v9',
  );
});

test('duplicate keys and broken YAML are reported', async () => {
  await expectProblem(POD(CONTAINER + '  hostNetwork: true\n  hostNetwork: false\n'), 'YAML:');
  await expectProblem('apiVersion: v1\nkind: [Pod\n', 'YAML:');
});
