// What the dashboard check must refuse, each named in its report, and how it
// reads metric names from a Prometheus exposition.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkDashboard, exportedMetrics } from './dashboard_check.mjs';

const EXPOSITION = `# HELP granary_cache_hits_total Chunk reads answered from the local store.
# TYPE granary_cache_hits_total counter
granary_cache_hits_total 3
# HELP granary_job_read_wait_seconds Time a job's reads took.
# TYPE granary_job_read_wait_seconds histogram
# HELP granary_job_read_bytes_total Bytes a job read, by where they came from.
# TYPE granary_job_read_bytes_total counter
granary_job_read_bytes_total{job_id="slurm:1",dataset="d",origin="local"} 10
`;
const METRICS = exportedMetrics(EXPOSITION);

function dashboard(expr, change = (d) => d) {
  return change({
    title: 'Granary',
    uid: 'granary-test',
    schemaVersion: 39,
    time: { from: 'now-1h', to: 'now' },
    templating: {
      list: [
        { name: 'datasource', type: 'datasource', query: 'prometheus' },
        { name: 'job', type: 'query', query: { query: 'label_values(granary_job_read_bytes_total, job_id)' } },
      ],
    },
    panels: [
      {
        id: 1,
        type: 'timeseries',
        title: 'Hits',
        gridPos: { h: 6, w: 12, x: 0, y: 0 },
        datasource: { type: 'prometheus', uid: '${datasource}' },
        targets: [{ refId: 'A', expr }],
      },
    ],
  });
}

function expectProblem(value, named) {
  const problems = checkDashboard(value, METRICS);
  assert.ok(
    problems.some((problem) => problem.includes(named)),
    `expected a problem naming ${JSON.stringify(named)}, got ${JSON.stringify(problems)}`,
  );
}

test('metric names come from TYPE lines and samples, histograms with their series', () => {
  assert.deepEqual(
    [...METRICS].sort(),
    [
      'granary_cache_hits_total',
      'granary_job_read_bytes_total',
      'granary_job_read_wait_seconds',
      'granary_job_read_wait_seconds_bucket',
      'granary_job_read_wait_seconds_count',
      'granary_job_read_wait_seconds_sum',
    ],
  );
});

test('a valid dashboard passes, Grafana variables and histograms included', () => {
  const expr =
    'histogram_quantile(0.9, sum by (le) (rate(granary_job_read_wait_seconds_bucket{job_id=~"$job"}[$__rate_interval])))' +
    ' + sum(rate(granary_cache_hits_total[$__interval]))';
  assert.deepEqual(checkDashboard(dashboard(expr), METRICS), []);
});

test('a metric granaryd does not export is refused, by name or by __name__', () => {
  expectProblem(dashboard('rate(granary_cache_hit_total[5m])'), 'granaryd exports no metric "granary_cache_hit_total"');
  expectProblem(dashboard('{__name__="granary_renamed"}'), 'granaryd exports no metric "granary_renamed"');
});

test('a variable query on a metric granaryd does not export is refused', () => {
  expectProblem(
    dashboard('granary_cache_hits_total', (d) => {
      d.templating.list[1].query.query = 'label_values(granary_jobs_reads, job_id)';
      return d;
    }),
    'granaryd exports no metric "granary_jobs_reads"',
  );
});

test('PromQL that does not parse is refused', () => {
  expectProblem(dashboard('sum(rate(granary_cache_hits_total[5m])'), 'PromQL does not parse');
  expectProblem(dashboard('1 + 1'), 'selects no metric');
});

test('an undefined variable is refused', () => {
  expectProblem(dashboard('granary_cache_hits_total{instance=~"$node"}'), 'undefined variable $node');
});

test('panels without targets, refIds, ids or a place on the grid are refused', () => {
  expectProblem(dashboard('x', (d) => { d.panels[0].targets = []; return d; }), 'no targets');
  expectProblem(dashboard('granary_cache_hits_total', (d) => {
    d.panels[0].targets.push({ refId: 'A', expr: 'granary_cache_hits_total' });
    return d;
  }), 'refId A is not unique');
  expectProblem(dashboard('granary_cache_hits_total', (d) => {
    d.panels.push({ ...d.panels[0] });
    return d;
  }), 'id 1 is not unique');
  expectProblem(dashboard('granary_cache_hits_total', (d) => {
    d.panels[0].gridPos.x = 20;
    return d;
  }), 'off the 24-column grid');
  expectProblem(dashboard('granary_cache_hits_total', (d) => {
    d.panels[0].type = 'graph2';
    return d;
  }), 'unknown panel type');
  expectProblem(dashboard('granary_cache_hits_total', (d) => {
    d.panels[0].datasource = { type: 'loki', uid: 'x' };
    return d;
  }), 'not of type prometheus');
});

test('a dashboard without title, uid, schemaVersion, time or panels is refused', () => {
  expectProblem(dashboard('granary_cache_hits_total', (d) => { delete d.title; return d; }), 'no title');
  expectProblem(dashboard('granary_cache_hits_total', (d) => { delete d.uid; return d; }), 'no uid');
  expectProblem(dashboard('granary_cache_hits_total', (d) => { delete d.schemaVersion; return d; }), 'schemaVersion');
  expectProblem(dashboard('granary_cache_hits_total', (d) => { delete d.time; return d; }), 'no time range');
  expectProblem(dashboard('granary_cache_hits_total', (d) => { d.panels = []; return d; }), 'no panels');
  expectProblem([], 'not a JSON object');
});
