/**
 * deploy/grafana and deploy/prometheus: every PromQL expression of the dashboard (panel targets,
 * rows' panels, template variable queries) and of the alerting rules names only metrics that
 * src/observability/metrics.ts exports (or Prometheus' own `up`), so a renamed metric cannot leave
 * a panel empty or an alert silently dead. Every alert has a severity and the annotations an
 * on-call person needs; every dashboard panel says how to read it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { Metrics } from '../../src/observability/metrics';
import type { JobQueue } from '../../src/ports/job-queue';

const root = path.join(__dirname, '../..');
const dashboardPath = path.join(root, 'deploy/grafana/visual-search.json');
const alertsPath = path.join(root, 'deploy/prometheus/alerts.yaml');

// ---------------------------------------------------------------------------------------------
// A PromQL tokeniser and metric-name extractor (no evaluation, no full grammar): enough to tell
// metric names from functions, aggregators, keywords, label names, label values and durations.

/** PromQL functions (prometheus/promql/parser/functions.go), case-sensitive. */
const FUNCTIONS = new Set([
  'abs',
  'absent',
  'absent_over_time',
  'acos',
  'acosh',
  'asin',
  'asinh',
  'atan',
  'atanh',
  'avg_over_time',
  'ceil',
  'changes',
  'clamp',
  'clamp_max',
  'clamp_min',
  'cos',
  'cosh',
  'count_over_time',
  'day_of_month',
  'day_of_week',
  'day_of_year',
  'days_in_month',
  'deg',
  'delta',
  'deriv',
  'double_exponential_smoothing',
  'end',
  'exp',
  'floor',
  'histogram_avg',
  'histogram_count',
  'histogram_fraction',
  'histogram_quantile',
  'histogram_stddev',
  'histogram_stdvar',
  'histogram_sum',
  'holt_winters',
  'hour',
  'idelta',
  'increase',
  'info',
  'irate',
  'label_join',
  'label_replace',
  'last_over_time',
  'ln',
  'log10',
  'log2',
  'mad_over_time',
  'max_over_time',
  'min_over_time',
  'minute',
  'month',
  'pi',
  'predict_linear',
  'present_over_time',
  'quantile_over_time',
  'rad',
  'rate',
  'resets',
  'round',
  'scalar',
  'sgn',
  'sin',
  'sinh',
  'sort',
  'sort_by_label',
  'sort_by_label_desc',
  'sort_desc',
  'sqrt',
  'start',
  'stddev_over_time',
  'stdvar_over_time',
  'sum_over_time',
  'tan',
  'tanh',
  'time',
  'timestamp',
  'vector',
  'year',
]);

/** Aggregation operators, case-insensitive: followed by `(` or by a `by`/`without` clause. */
const AGGREGATORS = new Set([
  'avg',
  'bottomk',
  'count',
  'count_values',
  'group',
  'limit_ratio',
  'limitk',
  'max',
  'min',
  'quantile',
  'stddev',
  'stdvar',
  'sum',
  'topk',
]);

/** Keywords whose parenthesised argument is a list of label names, not an expression. */
const LABEL_LIST_KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
]);

/** Other keywords and the float literals that look like identifiers, case-insensitive. */
const KEYWORDS = new Set(['and', 'or', 'unless', 'atan2', 'bool', 'offset', 'inf', 'nan']);

const MATCH_OPS = new Set(['=', '!=', '=~', '!~']);

interface Token {
  kind: 'ident' | 'string' | 'number' | 'var' | 'punct';
  text: string;
}

const IDENT = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const NUMBER =
  /^(?:0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)?)/;
/** Grafana variables: $name, ${name}, ${name:format}, $__rate_interval. */
const GRAFANA_VAR = /^\$(?:\{[^}]*\}|[a-zA-Z0-9_]+)/;
const PUNCT = ['==', '!=', '=~', '!~', '<=', '>=', ...'{}()[],=<>+-*/%^@:'];

function tokenize(expr: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < expr.length) {
    const rest = expr.slice(i);
    const c = expr[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === '#') {
      const nl = expr.indexOf('\n', i);
      i = nl < 0 ? expr.length : nl;
    } else if (c === '"' || c === "'" || c === '`') {
      let j = i + 1;
      while (j < expr.length && expr[j] !== c) j += c !== '`' && expr[j] === '\\' ? 2 : 1;
      if (j >= expr.length) throw new Error(`unterminated string at ${i} in: ${expr}`);
      tokens.push({ kind: 'string', text: expr.slice(i + 1, j) });
      i = j + 1;
    } else if (GRAFANA_VAR.test(rest)) {
      const m = GRAFANA_VAR.exec(rest)![0];
      tokens.push({ kind: 'var', text: m });
      i += m.length;
    } else if (/^\.?\d/.test(rest)) {
      const m = NUMBER.exec(rest)![0];
      tokens.push({ kind: 'number', text: m });
      i += m.length;
    } else if (IDENT.test(rest)) {
      const m = IDENT.exec(rest)![0];
      tokens.push({ kind: 'ident', text: m });
      i += m.length;
    } else {
      const p = PUNCT.find((op) => rest.startsWith(op));
      if (!p) throw new Error(`unexpected ${JSON.stringify(c)} at ${i} in: ${expr}`);
      tokens.push({ kind: 'punct', text: p });
      i += p.length;
    }
  }
  return tokens;
}

/**
 * The metric names an expression selects: bare selectors (`foo`, `foo{…}`, `foo[5m]`), quoted
 * names inside braces (`{"foo"}`) and `__name__="foo"` matchers. Throws on unbalanced brackets,
 * on a call of an unknown function and on a metric name it cannot check (`__name__=~…`).
 */
function metricNames(expr: string): string[] {
  const toks = tokenize(expr);
  const names: string[] = [];
  const fail = (why: string): never => {
    throw new Error(`${why} in: ${expr}`);
  };
  const isPunct = (k: number, text: string) => toks[k]?.kind === 'punct' && toks[k]?.text === text;
  /** Index of the token closing the bracket opened at `open`; the inside is checked by `each`. */
  const closing = (open: number, close: string, each: (k: number) => void = () => {}) => {
    let k = open + 1;
    for (; k < toks.length && !isPunct(k, close); k++) {
      if (toks[k].kind === 'punct' && '{[('.includes(toks[k].text)) fail(`nested ${toks[k].text}`);
      each(k);
    }
    if (k >= toks.length) fail(`unclosed ${toks[open].text}`);
    return k;
  };
  let depth = 0;
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    const next = toks[i + 1];
    if (t.kind === 'punct') {
      if (t.text === '{') {
        // Label matchers: label names and values are not metrics, except __name__ and a
        // quoted name standing alone (`{"metric.name", job="x"}`).
        i = closing(i, '}', (k) => {
          const tok = toks[k];
          const op = toks[k + 1];
          const before = toks[k - 1];
          if ((tok.kind === 'ident' || tok.kind === 'string') && op && MATCH_OPS.has(op.text)) {
            if (tok.text !== '__name__') return;
            const value = toks[k + 2];
            if (op.text !== '=' || value?.kind !== 'string')
              fail('a __name__ matcher other than = "name" cannot be checked');
            names.push(value!.text);
          } else if (tok.kind === 'string' && !(before && MATCH_OPS.has(before.text))) {
            names.push(tok.text);
          }
        });
      } else if (t.text === '[') {
        i = closing(i, ']'); // a range or subquery: durations and Grafana variables only
      } else if (t.text === '(') {
        depth++;
      } else if (t.text === ')') {
        if (--depth < 0) fail('unbalanced )');
      } else if (t.text === '}' || t.text === ']') {
        fail(`unbalanced ${t.text}`);
      }
      continue;
    }
    if (t.kind !== 'ident') continue;
    const word = t.text.toLowerCase();
    const call = next?.kind === 'punct' && next.text === '(';
    if (LABEL_LIST_KEYWORDS.has(word)) {
      if (call)
        i = closing(i + 1, ')', (k) => {
          if (toks[k].kind !== 'ident' && toks[k].kind !== 'string' && !isPunct(k, ','))
            fail(`${toks[k].text} in the label list of ${t.text}`);
        });
    } else if (KEYWORDS.has(word)) {
      // an operator, a modifier or a float literal
    } else if (
      AGGREGATORS.has(word) &&
      (call || (next?.kind === 'ident' && ['by', 'without'].includes(next.text.toLowerCase())))
    ) {
      // an aggregation
    } else if (call) {
      if (!FUNCTIONS.has(t.text)) fail(`unknown function ${t.text}`);
    } else {
      names.push(t.text);
    }
  }
  if (depth !== 0) fail('unbalanced (');
  return names;
}

// ---------------------------------------------------------------------------------------------
// The assets

interface Expr {
  where: string;
  expr: string;
}

function readDashboard(): any {
  return JSON.parse(fs.readFileSync(dashboardPath, 'utf8'));
}

/** Every panel, rows' nested panels included. */
function allPanels(panels: any[] = []): any[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels)]);
}

/**
 * The PromQL inside a Grafana variable query: `label_values(selector, label)` → the selector,
 * `query_result(expr)` → expr, `label_values(label)`, `label_names()`, `metrics(…)` → nothing.
 */
function variableExprs(query: string): string[] {
  const q = query.trim();
  const labelValues = /^label_values\(([\s\S]*)\)$/.exec(q);
  if (labelValues) {
    const withSelector = /^([\s\S]*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*$/.exec(labelValues[1]);
    return withSelector ? [withSelector[1]] : [];
  }
  const result = /^query_result\(([\s\S]*)\)$/.exec(q);
  if (result) return [result[1]];
  if (/^(label_names|metrics)\(/.test(q)) return [];
  return [q];
}

function dashboardExprs(dashboard: any): Expr[] {
  const exprs: Expr[] = [];
  for (const panel of allPanels(dashboard.panels))
    for (const target of panel.targets ?? [])
      exprs.push({ where: `panel "${panel.title}" ${target.refId}`, expr: target.expr });
  for (const v of dashboard.templating?.list ?? []) {
    if (v.type !== 'query') continue;
    const query: unknown = typeof v.query === 'string' ? v.query : v.query?.query;
    if (typeof query !== 'string') throw new Error(`variable ${v.name} has no query`);
    for (const expr of variableExprs(query)) exprs.push({ where: `variable $${v.name}`, expr });
  }
  return exprs;
}

function readRules(): any[] {
  const doc = parseDocument(fs.readFileSync(alertsPath, 'utf8'));
  const problems = [...doc.errors, ...doc.warnings].map((e) => e.message);
  if (problems.length) throw new Error(`alerts.yaml: ${problems.join('; ')}`);
  const groups = (doc.toJS() as any)?.groups;
  if (!Array.isArray(groups) || groups.length === 0) throw new Error('alerts.yaml: no groups');
  return groups.flatMap((g: any) =>
    (g.rules ?? []).map((rule: any) => ({ group: g.name, ...rule })),
  );
}

/** `where: name` for every metric an expression names that `known` lacks. */
function unknownMetrics(exprs: Expr[], known: Set<string>): string[] {
  return exprs.flatMap(({ where, expr }) =>
    metricNames(expr)
      .filter((name) => !known.has(name))
      .map((name) => `${where}: ${name}`),
  );
}

/** The series names the service exports, as Prometheus stores them, plus `up`. */
async function exportedSeries(): Promise<Set<string>> {
  const metrics = new Metrics();
  // The queue gauges exist once a queue is watched; `true` = a consuming process (worker),
  // which also exports queue_oldest_job_age_seconds.
  const queue = {
    stats: async () => ({ ready: 0, delayed: 0, running: 0, dead: 0, oldestReadyAgeMs: 0 }),
  } as unknown as JobQueue;
  metrics.watchQueue(queue, true);
  const known = new Set(['up']);
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    // prom-client's typings say a numeric enum; the value is the exposition type's name.
    const type = String(m.type);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) known.add(m.name + s);
    else if (type === 'summary') for (const s of ['', '_sum', '_count']) known.add(m.name + s);
    else known.add(m.name);
  }
  return known;
}

// ---------------------------------------------------------------------------------------------

describe('the PromQL metric-name extractor', () => {
  it.each<[string, string[]]>([
    ['up', ['up']],
    ['up{job="x"} == 0', ['up']],
    [
      'histogram_quantile(0.95, sum by (le, route) (rate(http_request_duration_seconds_bucket{job=~"$job", route!~"/a|/b"}[$__rate_interval])))',
      ['http_request_duration_seconds_bucket'],
    ],
    [
      'sum(rate(a_total{status=~"5.."}[5m] offset 1h)) by (job) / on (job) group_left (instance) b',
      ['a_total', 'b'],
    ],
    ['SUM BY (job) (foo) > bool 1 and ignoring(x) bar unless baz', ['foo', 'bar', 'baz']],
    ['max_over_time(deriv(x[10m])[1h:5m]) @ end() > Inf', ['x']],
    ['topk(3, y) or count_values("value", z) or vector(1)', ['y', 'z']],
    [
      'absent(q{__name__="named", state="dead"}) or {"quoted.name", job="j"}',
      ['q', 'named', 'quoted.name'],
    ],
    [
      'label_replace(rec:rule:sum, "dst", "$1", "src", "(.*)") # a comment names no_metric',
      ['rec:rule:sum'],
    ],
  ])('%s', (expr, names) => {
    expect(metricNames(expr)).toEqual(names);
  });

  it.each([
    'rate(x[5m]',
    'rate(x[5m]))',
    'x{job="a"',
    'rate_of(x[5m])',
    '{__name__=~"x.*"}',
    'sum by (rate(x)) (y)',
  ])('rejects %s', (expr) => {
    expect(() => metricNames(expr)).toThrow();
  });
});

describe('observability assets', () => {
  let known: Set<string>;
  const dashboard = readDashboard();
  const rules = readRules();

  beforeAll(async () => {
    known = await exportedSeries();
  });

  it('knows the service metrics, as series names', () => {
    for (const name of [
      'http_request_duration_seconds_bucket',
      'graphql_operation_duration_seconds_count',
      'image_jobs_total',
      'image_job_duration_seconds_bucket',
      'queue_depth',
      'queue_oldest_job_age_seconds',
      'search_engine_request_duration_seconds_bucket',
      'image_fetch_bytes_total',
      'process_cpu_seconds_total',
      'up',
    ])
      expect(known).toContain(name);
    // A classic histogram's base name is not a series.
    expect(known).not.toContain('http_request_duration_seconds');
  });

  it('catches a metric the service does not export', () => {
    const wrong = [
      { where: 'typo', expr: 'rate(image_job_total[5m])' },
      { where: 'base', expr: 'histogram_quantile(0.5, rate(image_job_duration_seconds[5m]))' },
      { where: 'ok', expr: 'sum by (outcome) (rate(image_jobs_total[5m]))' },
    ];
    expect(unknownMetrics(wrong, known)).toEqual([
      'typo: image_job_total',
      'base: image_job_duration_seconds',
    ]);
  });

  describe('the Grafana dashboard', () => {
    const panels = allPanels(dashboard.panels);
    const exprs = dashboardExprs(dashboard);

    it('is a dashboard on a Prometheus datasource variable, with job and instance variables', () => {
      expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
      expect(typeof dashboard.uid).toBe('string');
      expect(typeof dashboard.title).toBe('string');
      const vars = dashboard.templating.list;
      const byName = (n: string) => vars.find((v: any) => v.name === n);
      expect(byName('datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
      expect(byName('job')).toMatchObject({ type: 'query', includeAll: true, multi: true });
      expect(byName('instance')).toMatchObject({ type: 'query', includeAll: true, multi: true });
    });

    it('gives every panel a unique id, a title, a description and a position', () => {
      const ids = panels.map((p) => p.id);
      expect(new Set(ids).size).toBe(ids.length);
      for (const p of panels) {
        expect(typeof p.title).toBe('string');
        expect(p.gridPos).toEqual(expect.objectContaining({ w: expect.any(Number) }));
        if (p.type === 'row') continue;
        if (typeof p.description !== 'string' || p.description.trim().length < 20)
          throw new Error(`panel "${p.title}" has no description saying how to read it`);
      }
    });

    it('queries the ${datasource} variable from every panel and target', () => {
      for (const p of panels.filter((p) => p.type !== 'row')) {
        expect(p.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
        expect(p.targets.length).toBeGreaterThan(0);
        const refIds = p.targets.map((t: any) => t.refId);
        expect(new Set(refIds).size).toBe(refIds.length);
        for (const t of p.targets) {
          expect(t.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
          expect(typeof t.expr).toBe('string');
        }
      }
    });

    it('filters every query by the job and instance variables', () => {
      for (const { where, expr } of exprs.filter((e) => !e.where.startsWith('variable'))) {
        if (!expr.includes('job=~"$job"') || !expr.includes('instance=~"$instance"'))
          throw new Error(`${where} does not filter on $job and $instance: ${expr}`);
      }
    });

    it('uses only metrics the service exports', () => {
      expect(exprs.length).toBeGreaterThan(20);
      expect(unknownMetrics(exprs, known)).toEqual([]);
    });

    it('shows every metric of the service', () => {
      const used = new Set(exprs.flatMap((e) => metricNames(e.expr)));
      const service = [
        'http_request_duration_seconds',
        'graphql_operation_duration_seconds',
        'image_jobs_total',
        'image_job_duration_seconds',
        'queue_depth',
        'queue_oldest_job_age_seconds',
        'search_engine_request_duration_seconds',
        'image_fetch_bytes_total',
        'embedder_run_images',
        'process_cpu_seconds_total',
        'process_resident_memory_bytes',
      ];
      for (const name of service)
        if (![name, `${name}_bucket`, `${name}_count`].some((n) => used.has(n)))
          throw new Error(`no panel shows ${name}`);
      expect([...used].some((n) => n.startsWith('nodejs_eventloop_lag'))).toBe(true);
    });
  });

  describe('the Prometheus alerting rules', () => {
    it('are alerts with unique names, an expression and a duration', () => {
      expect(rules.length).toBeGreaterThan(0);
      const names = rules.map((r) => r.alert);
      expect(new Set(names).size).toBe(names.length);
      for (const r of rules) {
        expect(typeof r.alert).toBe('string');
        expect(typeof r.expr).toBe('string');
        expect(String(r.for)).toMatch(/^(\d+(ms|[smhdwy]))+$/);
      }
    });

    it('give every alert a severity and summary, description and runbook annotations', () => {
      for (const r of rules) {
        const where = `alert ${r.alert}`;
        if (!['critical', 'warning', 'info'].includes(r.labels?.severity))
          throw new Error(`${where}: severity label missing or not critical/warning/info`);
        for (const a of ['summary', 'description', 'runbook'])
          if (typeof r.annotations?.[a] !== 'string' || !r.annotations[a].trim())
            throw new Error(`${where}: no ${a} annotation`);
        expect(r.annotations.runbook).toBe('README.md#operations');
      }
    });

    it('use only metrics the service exports', () => {
      const exprs = rules.map((r) => ({ where: `alert ${r.alert}`, expr: String(r.expr) }));
      expect(unknownMetrics(exprs, known)).toEqual([]);
    });

    it('cover the queue, jobs, HTTP errors, unavailability and dead letters', () => {
      const used = (name: string) => rules.filter((r) => metricNames(r.expr).includes(name));
      expect(used('queue_oldest_job_age_seconds').length).toBeGreaterThanOrEqual(2);
      expect(rules.some((r) => /\bderiv\(/.test(r.expr))).toBe(true);
      expect(used('image_jobs_total').length).toBeGreaterThan(0);
      expect(rules.some((r) => /status=~"5\.\."/.test(r.expr))).toBe(true);
      expect(rules.some((r) => /status="503"/.test(r.expr))).toBe(true);
      expect(used('up').length).toBeGreaterThan(0);
      expect(rules.some((r) => /queue_depth\{[^}]*state="dead"/.test(r.expr))).toBe(true);
    });
  });
});
