// Checks a Grafana dashboard offline: the shape Grafana's dashboard schema
// gives it (a titled dashboard with a uid, a schemaVersion, a time range and
// panels; each panel an id unique in the dashboard, a known type, a title and
// a place on the 24-column grid; each panel that draws data a Prometheus
// datasource and targets with distinct refIds and an expression), every
// PromQL expression parsed by Prometheus' own grammar (@prometheus-io/
// lezer-promql) once Grafana's variables are put in, and every metric an
// expression or a variable's label_values() names one that granaryd exports.
//
// exportedMetrics(text) reads the metric names of a Prometheus text
// exposition (a histogram's _bucket, _sum and _count included, whether or not
// it has samples yet); checkDashboard(dashboard, metrics) returns the problems
// found, each a line naming the panel and what is wrong.
import { parser } from '@prometheus-io/lezer-promql';

const PANEL_TYPES = new Set(['row', 'text', 'stat', 'gauge', 'bargauge', 'timeseries', 'table', 'heatmap']);
const GRID_COLUMNS = 24;
// What Grafana puts in place of its built-in variables before the query
// reaches Prometheus; any value of the right kind parses the same.
const BUILT_IN_VARIABLES = [
  [/\$__rate_interval|\$__interval|\$__range/g, '5m'],
  [/\$\{?__\w+\}?/g, '1'],
];

export function exportedMetrics(text) {
  const names = new Set();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      names.add(type[1]);
      if (type[2] === 'histogram' || type[2] === 'summary') {
        for (const suffix of ['_bucket', '_sum', '_count']) names.add(type[1] + suffix);
      }
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (sample) names.add(sample[1]);
  }
  return names;
}

// The metric names `expr` selects, and its parse errors.
export function parsePromQL(expr) {
  let text = expr;
  for (const [pattern, value] of BUILT_IN_VARIABLES) text = text.replace(pattern, value);
  const metrics = [];
  const errors = [];
  parser.parse(text).iterate({
    enter(node) {
      if (node.type.isError) errors.push(`at ${node.from}: "${text.slice(node.from, node.from + 20)}"`);
      if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector') {
        metrics.push(text.slice(node.from, node.to));
      }
      if (node.name === 'UnquotedLabelMatcher' || node.name === 'QuotedLabelMatcher') {
        const name = /^__name__\s*=\s*"([^"]*)"$/.exec(text.slice(node.from, node.to));
        if (name) metrics.push(name[1]);
      }
    },
  });
  return { metrics, errors };
}

function checkMetrics(where, names, metrics, problems) {
  for (const name of names) {
    if (!metrics.has(name)) problems.push(`${where}: granaryd exports no metric "${name}"`);
  }
}

function checkExpression(where, expr, metrics, problems) {
  if (typeof expr !== 'string' || expr.trim() === '') {
    problems.push(`${where}: no PromQL expression (expr)`);
    return;
  }
  const parsed = parsePromQL(expr);
  for (const error of parsed.errors) problems.push(`${where}: PromQL does not parse ${error}`);
  if (parsed.metrics.length === 0) problems.push(`${where}: the expression selects no metric`);
  checkMetrics(where, parsed.metrics, metrics, problems);
}

function checkGridPos(where, gridPos, problems) {
  const fields = ['h', 'w', 'x', 'y'];
  if (gridPos === null || typeof gridPos !== 'object' || !fields.every((f) => Number.isInteger(gridPos[f]))) {
    problems.push(`${where}: gridPos needs integer h, w, x and y`);
    return;
  }
  if (gridPos.w < 1 || gridPos.h < 1 || gridPos.x < 0 || gridPos.y < 0 || gridPos.x + gridPos.w > GRID_COLUMNS) {
    problems.push(`${where}: gridPos ${JSON.stringify(gridPos)} is off the ${GRID_COLUMNS}-column grid`);
  }
}

function checkPanel(panel, index, ids, variables, metrics, problems) {
  const where = `panel ${index} (${JSON.stringify(panel?.title ?? '')})`;
  if (panel === null || typeof panel !== 'object') {
    problems.push(`${where}: not an object`);
    return;
  }
  if (!Number.isInteger(panel.id)) problems.push(`${where}: no integer id`);
  else if (ids.has(panel.id)) problems.push(`${where}: id ${panel.id} is not unique`);
  ids.add(panel.id);
  if (!PANEL_TYPES.has(panel.type)) problems.push(`${where}: unknown panel type ${JSON.stringify(panel.type)}`);
  if (typeof panel.title !== 'string' || panel.title === '') problems.push(`${where}: no title`);
  checkGridPos(where, panel.gridPos, problems);
  if (panel.type === 'row' || panel.type === 'text') return;
  if (panel.datasource?.type !== 'prometheus') problems.push(`${where}: datasource is not of type prometheus`);
  checkVariables(where, JSON.stringify(panel.datasource ?? ''), variables, problems);
  if (!Array.isArray(panel.targets) || panel.targets.length === 0) {
    problems.push(`${where}: no targets`);
    return;
  }
  const refIds = new Set();
  panel.targets.forEach((target, t) => {
    const at = `${where} target ${t}`;
    if (typeof target?.refId !== 'string' || target.refId === '') problems.push(`${at}: no refId`);
    else if (refIds.has(target.refId)) problems.push(`${at}: refId ${target.refId} is not unique`);
    refIds.add(target?.refId);
    checkExpression(at, target?.expr, metrics, problems);
    checkVariables(at, target?.expr ?? '', variables, problems);
  });
}

// Every $name or ${name} in `text` that is neither defined nor built in.
function checkVariables(where, text, variables, problems) {
  for (const [, braced, plain] of text.matchAll(/\$\{(\w+)[^}]*\}|\$(\w+)/g)) {
    const name = braced ?? plain;
    if (!name.startsWith('__') && !variables.has(name)) problems.push(`${where}: undefined variable $${name}`);
  }
}

function checkTemplating(dashboard, metrics, problems) {
  const list = dashboard.templating?.list ?? [];
  if (!Array.isArray(list)) {
    problems.push('templating.list: not an array');
    return new Set();
  }
  const variables = new Set();
  list.forEach((variable, i) => {
    const where = `variable ${i} (${JSON.stringify(variable?.name ?? '')})`;
    if (typeof variable?.name !== 'string' || !/^\w+$/.test(variable.name)) problems.push(`${where}: no name`);
    variables.add(variable?.name);
    if (variable?.type !== 'query') return;
    const query = typeof variable.query === 'string' ? variable.query : variable.query?.query;
    const values = /^label_values\((\w+)\s*,\s*(\w+)\)$/.exec(query ?? '');
    if (!values) {
      problems.push(`${where}: the query is not label_values(METRIC, LABEL)`);
      return;
    }
    checkMetrics(where, [values[1]], metrics, problems);
  });
  return variables;
}

export function checkDashboard(dashboard, metrics) {
  const problems = [];
  if (dashboard === null || typeof dashboard !== 'object' || Array.isArray(dashboard)) {
    return ['the dashboard is not a JSON object'];
  }
  for (const field of ['title', 'uid']) {
    if (typeof dashboard[field] !== 'string' || dashboard[field] === '') problems.push(`dashboard: no ${field}`);
  }
  if (typeof dashboard.uid === 'string' && dashboard.uid.length > 40) {
    problems.push('dashboard: uid longer than 40 characters');
  }
  if (!Number.isInteger(dashboard.schemaVersion)) problems.push('dashboard: no integer schemaVersion');
  if (typeof dashboard.time?.from !== 'string' || typeof dashboard.time?.to !== 'string') {
    problems.push('dashboard: no time range (time.from, time.to)');
  }
  const variables = checkTemplating(dashboard, metrics, problems);
  if (!Array.isArray(dashboard.panels) || dashboard.panels.length === 0) {
    problems.push('dashboard: no panels');
    return problems;
  }
  const ids = new Set();
  dashboard.panels.forEach((panel, i) => checkPanel(panel, i, ids, variables, metrics, problems));
  return problems;
}
