// Usage: node check_dashboard.mjs GRANARYD DASHBOARD.json...
// Starts GRANARYD (a fresh data directory, its own socket, a free metrics
// port), reads the metric names its /metrics exports, and checks each
// dashboard against them (dashboard_check.mjs); prints each problem and a
// closing "N passed, N failed" line of dashboards; exits 1 if any has one.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkDashboard, exportedMetrics } from './dashboard_check.mjs';

const STARTUP_TIMEOUT_MS = 30_000;

const [granaryd, ...dashboards] = process.argv.slice(2);
if (!granaryd || dashboards.length === 0) {
  console.error('usage: node check_dashboard.mjs GRANARYD DASHBOARD.json...');
  process.exit(2);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// The text of GET /metrics, asked until granaryd answers (or exits).
async function metricsOf(child, address, log) {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (spawnError) throw new Error(`cannot run ${granaryd}: ${spawnError.message}`);
    if (child.exitCode !== null) throw new Error(`granaryd exited with ${child.exitCode}:\n${log()}`);
    try {
      const answer = await fetch(`http://${address}/metrics`);
      if (answer.ok) return await answer.text();
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`granaryd did not answer on http://${address}/metrics within ${STARTUP_TIMEOUT_MS} ms:\n${log()}`);
}

const dir = mkdtempSync(join(tmpdir(), 'granary-dashboard-'));
const address = `127.0.0.1:${await freePort()}`;
let output = '';
const child = spawn(granaryd, [
  '--data-dir', join(dir, 'data'), '--socket', join(dir, 'granaryd.sock'),
  '--metrics-listen', address, '--capacity', '64MiB',
]);
let spawnError = null;
child.on('error', (error) => { spawnError = error; });
child.stdout.on('data', (chunk) => { output += chunk; });
child.stderr.on('data', (chunk) => { output += chunk; });
let metrics;
try {
  metrics = exportedMetrics(await metricsOf(child, address, () => output));
} finally {
  if (!spawnError) {
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
  }
  rmSync(dir, { recursive: true, force: true });
}

let failed = 0;
for (const file of dashboards) {
  let problems;
  try {
    problems = checkDashboard(JSON.parse(readFileSync(file, 'utf8')), metrics);
  } catch (error) {
    problems = [`not JSON: ${error.message}`];
  }
  if (problems.length > 0) failed += 1;
  for (const problem of problems) console.log(`${file}: ${problem}`);
  if (problems.length === 0) console.log(`${file}: ok`);
}
console.log(`${dashboards.length - failed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
