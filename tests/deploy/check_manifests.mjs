// Usage: node check_manifests.mjs DIR...
// Checks every .yaml file under each DIR (manifest_check.mjs), prints each
// problem and a closing "N passed, N failed" line of files; exits 1 if any
// file has a problem.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { checkManifest } from './manifest_check.mjs';

const files = process.argv
  .slice(2)
  .flatMap((dir) => readdirSync(dir, { recursive: true }).filter((f) => f.endsWith('.yaml')).map((f) => join(dir, f)))
  .sort();
if (files.length === 0) {
  console.error('check_manifests: no .yaml files under ' + process.argv.slice(2).join(' '));
  process.exit(1);
}
let failed = 0;
for (const file of files) {
  const problems = await checkManifest(readFileSync(file, 'utf8'), file);
  if (problems.length > 0) failed += 1;
  for (const problem of problems) console.log(problem);
  if (problems.length === 0) console.log(`${file}: ok`);
}
console.log(`${files.length - failed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
