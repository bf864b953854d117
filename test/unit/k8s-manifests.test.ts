/**
 * deploy/kubernetes: every object validates against the Kubernetes schemas (kubernetes-models,
 * plus a check for fields the schema does not know, which its validator lets through), and the
 * manifests fit the service: stateless api and worker pods, probes on the port the process
 * listens on, only settings src/config/env.ts knows, secrets from the Secret.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service } from 'kubernetes-models/v1';
import { parseAllDocuments } from 'yaml';
import { ConfigError, loadConfig } from '../../src/config/env';

const root = path.join(__dirname, '../..');
const dir = path.join(root, 'deploy/kubernetes');

interface Validatable {
  validate(): void;
}
type ModelClass = { prototype: Validatable } & (new (data: any) => Validatable);

/** The kinds the manifests may use; anything else fails the test. */
const models: Record<string, ModelClass> = {
  'apps/v1 Deployment': Deployment,
  'apps/v1 StatefulSet': StatefulSet,
  'autoscaling/v2 HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1 NetworkPolicy': NetworkPolicy,
  'policy/v1 PodDisruptionBudget': PodDisruptionBudget,
  'v1 ConfigMap': ConfigMap,
  'v1 Secret': Secret,
  'v1 Service': Service,
};

function parseFile(file: string): any[] {
  const docs = parseAllDocuments(fs.readFileSync(path.join(dir, file), 'utf8'));
  if (!Array.isArray(docs)) return [];
  for (const d of docs) {
    const problems = [...d.errors, ...d.warnings].map((e) => e.message);
    if (problems.length) throw new Error(`${file}: ${problems.join('; ')}`);
  }
  return docs.map((d) => d.toJS()).filter((o) => o !== null);
}

const files = fs
  .readdirSync(dir)
  .filter((f) => /\.ya?ml$/.test(f))
  .sort();
const manifestFiles = files.filter((f) => f !== 'kustomization.yaml');
const objects = manifestFiles.flatMap((file) =>
  parseFile(file).map((obj, i) => ({
    file,
    label: `${file}#${i} ${obj?.kind} ${obj?.metadata?.name}`,
    obj,
  })),
);
const all = objects.map((o) => o.obj);
const ofKind = (kind: string): any[] => all.filter((o) => o.kind === kind);

/**
 * Fields the schema does not define. The generated validators read every property their schema
 * names (and every entry of a map) and never look at others, so whatever the validation did not
 * read is unknown: a misspelt `livenesProbe` would otherwise pass silently.
 */
function unknownFields(Model: ModelClass, obj: unknown): string[] {
  const read = new WeakMap<object, Set<string>>();
  const watch = (v: unknown): unknown => {
    if (!v || typeof v !== 'object') return v;
    if (!read.has(v)) read.set(v, new Set());
    return new Proxy(v, {
      get(target, key, receiver) {
        if (typeof key === 'string') read.get(target)!.add(key);
        return watch(Reflect.get(target, key, receiver));
      },
    });
  };
  const model = new Model(obj);
  Model.prototype.validate.call(watch(model));
  const unknown: string[] = [];
  const walk = (v: unknown, at: string): void => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${at}[${i}]`));
    else if (v && typeof v === 'object') {
      const seen = read.get(v);
      for (const [k, x] of Object.entries(v)) {
        if (seen?.has(k)) walk(x, `${at}.${k}`);
        else unknown.push(`${at}.${k}`);
      }
    }
  };
  walk(model, '');
  return unknown;
}

/** The settings the service reads: the keys of the zod object in src/config/env.ts. */
function knownSettings(): Set<string> {
  const src = fs.readFileSync(path.join(root, 'src/config/env.ts'), 'utf8');
  const start = src.indexOf('const schema = z.object({');
  const end = src.indexOf('\n});', start);
  expect(start).toBeGreaterThanOrEqual(0);
  expect(end).toBeGreaterThan(start);
  const keys = [...src.slice(start, end).matchAll(/^ {2}([A-Z][A-Z0-9_]*):/gm)].map((m) => m[1]);
  expect(keys).toEqual(expect.arrayContaining(['PORT', 'APP_ROLES', 'ELASTICSEARCH_URL']));
  return new Set(keys);
}

const selects = (selector: Record<string, string> | undefined, labels: Record<string, string>) =>
  !!selector && Object.entries(selector).every(([k, v]) => labels?.[k] === v);

/** The Deployments that run the service's image (api and worker). */
const service = ofKind('Deployment').filter(
  (d) => d.metadata.labels?.['app.kubernetes.io/name'] === 'visual-search-service',
);
const byName = (name: string) => service.find((d) => d.metadata.name === name);
const podSpec = (d: any) => d.spec.template.spec;
const mainContainer = (d: any) => podSpec(d).containers[0];
const envOf = (d: any): any[] => mainContainer(d).env ?? [];
const envValue = (d: any, name: string): string | undefined =>
  envOf(d).find((e) => e.name === name)?.value;

function secretValue(name: string, key: string): string | undefined {
  const s = ofKind('Secret').find((o) => o.metadata.name === name);
  if (!s) return undefined;
  if (s.stringData?.[key] !== undefined) return s.stringData[key];
  return s.data?.[key] === undefined ? undefined : Buffer.from(s.data[key], 'base64').toString();
}

describe('deploy/kubernetes', () => {
  test('has manifests', () => {
    expect(manifestFiles.length).toBeGreaterThan(0);
    expect(objects.length).toBeGreaterThan(0);
  });

  test.each(objects.map((o) => [o.label, o.obj]))(
    '%s validates against its Kubernetes schema',
    (_label, obj) => {
      const Model = models[`${obj.apiVersion} ${obj.kind}`];
      if (!Model) throw new Error(`unknown kind ${obj.apiVersion} ${obj.kind}: add its model`);
      expect(() => new Model(obj).validate()).not.toThrow();
      expect(unknownFields(Model, obj)).toEqual([]);
      // namespace-agnostic: applied with `-n` or an overlay's `namespace:`
      expect(obj.metadata?.namespace).toBeUndefined();
    },
  );

  test('the kustomization lists every manifest file and nothing else', () => {
    const [k, ...rest] = parseFile('kustomization.yaml');
    expect(rest).toEqual([]);
    expect(k.apiVersion).toBe('kustomize.config.k8s.io/v1beta1');
    expect(k.kind).toBe('Kustomization');
    expect(k.namespace).toBeUndefined();
    expect([...k.resources].sort()).toEqual(manifestFiles);
  });

  test('api and worker are Deployments of at least two pods, scaled on CPU', () => {
    expect(service.map((d) => d.metadata.name).sort()).toEqual(['vss-api', 'vss-worker']);
    for (const d of service) {
      expect(d.spec.replicas).toBeGreaterThanOrEqual(2);
      const hpa = ofKind('HorizontalPodAutoscaler').find(
        (h) =>
          h.apiVersion === 'autoscaling/v2' &&
          h.spec.scaleTargetRef.kind === 'Deployment' &&
          h.spec.scaleTargetRef.name === d.metadata.name,
      );
      expect(hpa).toBeDefined();
      expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
      expect(hpa.spec.maxReplicas).toBeGreaterThanOrEqual(hpa.spec.minReplicas);
      expect(hpa.spec.metrics).toContainEqual(
        expect.objectContaining({
          type: 'Resource',
          resource: expect.objectContaining({ name: 'cpu' }),
        }),
      );
    }
  });

  test('api and worker keep nothing on disk: no volumes, no DATA_DIR', () => {
    for (const d of service) {
      const spec = podSpec(d);
      expect(spec.volumes ?? []).toEqual([]);
      for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
        expect(c.volumeMounts ?? []).toEqual([]);
        expect((c.env ?? []).map((e: any) => e.name)).not.toContain('DATA_DIR');
      }
      expect(envValue(d, 'SEARCH_BACKEND')).toBe('elasticsearch');
    }
  });

  test('readiness is /readyz and liveness /healthz, on the port the process listens on', () => {
    for (const d of service) {
      const c = mainContainer(d);
      expect(podSpec(d).containers).toHaveLength(1);
      const port = Number(envValue(d, 'PORT'));
      const declared = (c.ports ?? []).find((p: any) => p.containerPort === port);
      expect(declared).toBeDefined();
      const onPort = (probe: any) =>
        probe?.httpGet?.port === port || probe?.httpGet?.port === declared.name;
      expect(c.readinessProbe.httpGet.path).toBe('/readyz');
      expect(onPort(c.readinessProbe)).toBe(true);
      expect(c.livenessProbe.httpGet.path).toBe('/healthz');
      expect(onPort(c.livenessProbe)).toBe(true);
      if (c.startupProbe) {
        expect(c.startupProbe.httpGet.path).toBe('/healthz');
        expect(onPort(c.startupProbe)).toBe(true);
      }
    }
    // every process serves its health on PORT (a worker-only one too: src/app/start.ts), so
    // the workers run the worker role alone, without the API
    expect(envValue(byName('vss-worker'), 'APP_ROLES')).toBe('worker');
    expect(envValue(byName('vss-api'), 'APP_ROLES')).toBe('api');
  });

  test('no Service sends traffic to the worker pods', () => {
    const workerLabels = byName('vss-worker').spec.template.metadata.labels;
    for (const s of ofKind('Service')) expect(selects(s.spec.selector, workerLabels)).toBe(false);
    const api = ofKind('Service').find((s) => s.metadata.name === 'vss-api');
    expect(selects(api.spec.selector, byName('vss-api').spec.template.metadata.labels)).toBe(true);
  });

  test('api and worker have resources, a grace period and a hardened security context', () => {
    for (const d of service) {
      const c = mainContainer(d);
      for (const kind of ['requests', 'limits'])
        for (const r of ['cpu', 'memory']) expect(c.resources?.[kind]?.[r]).toBeDefined();
      expect(podSpec(d).terminationGracePeriodSeconds).toBeGreaterThanOrEqual(30);
      expect(podSpec(d).securityContext.runAsNonRoot).toBe(true);
      expect(c.securityContext.allowPrivilegeEscalation).toBe(false);
    }
  });

  test('api and worker set only settings the service knows, secrets from the Secret', () => {
    const known = knownSettings();
    for (const d of service) {
      const names = envOf(d).map((e) => e.name);
      expect(names.filter((n) => !known.has(n))).toEqual([]);
      expect(new Set(names).size).toBe(names.length);
      for (const secret of ['OPERATOR_TOKEN', 'AMQP_URL']) {
        const e = envOf(d).find((x) => x.name === secret);
        expect(e?.value).toBeUndefined();
        expect(e?.valueFrom?.secretKeyRef).toBeDefined();
      }
    }
  });

  test('every secretKeyRef names a key of a Secret in the manifests', () => {
    const workloads = [...ofKind('Deployment'), ...ofKind('StatefulSet')];
    const refs = workloads.flatMap((w) =>
      [...(podSpec(w).initContainers ?? []), ...podSpec(w).containers].flatMap((c: any) =>
        (c.env ?? []).map((e: any) => e.valueFrom?.secretKeyRef).filter(Boolean),
      ),
    );
    expect(refs.length).toBeGreaterThan(0);
    for (const r of refs)
      expect({ ...r, value: secretValue(r.name, r.key) }).toHaveProperty(
        'value',
        expect.any(String),
      );
  });

  test('the settings pass the service configuration check, the same for api and worker', () => {
    const operatorToken = 'k8s-manifest-test-operator-token';
    const resolved = (d: any): Record<string, string> =>
      Object.fromEntries(
        envOf(d).map((e) => {
          const ref = e.valueFrom?.secretKeyRef;
          if (!ref) return [e.name, e.value];
          return [
            e.name,
            e.name === 'OPERATOR_TOKEN' ? operatorToken : secretValue(ref.name, ref.key),
          ];
        }),
      );
    const configs = service.map((d) => loadConfig(resolved(d)));
    for (const c of configs) {
      expect(c.SEARCH_BACKEND).toBe('elasticsearch');
      expect(c.QUEUE).toBe('rabbitmq');
    }
    // one installation: the same store, indices, broker and queues everywhere
    const shared = [
      'SEARCH_BACKEND',
      'ELASTICSEARCH_URL',
      'ELASTICSEARCH_SHARDS',
      'ELASTICSEARCH_REPLICAS',
      'ES_INDEX_PREFIX',
      'QUEUE',
      'AMQP_URL',
      'AMQP_QUEUE_PREFIX',
      'OPERATOR_TOKEN',
    ] as const;
    const pick = (c: (typeof configs)[number]) => shared.map((k) => c[k]);
    expect(pick(configs[1])).toEqual(pick(configs[0]));
    expect(envOf(byName('vss-worker')).find((e) => e.name === 'WORKER_CONCURRENCY')).toBeDefined();
  });

  test('the example Secret cannot be deployed as it is: its operator token is refused', () => {
    const token = secretValue('vss-secrets', 'OPERATOR_TOKEN');
    expect(token).toMatch(/CHANGE-ME/);
    expect(() => loadConfig({ OPERATOR_TOKEN: token })).toThrow(ConfigError);
  });

  test('ELASTICSEARCH_URL names every node of the StatefulSet, which can hold the replicas', () => {
    const [es] = ofKind('StatefulSet').filter((s) => /elasticsearch/.test(s.metadata.name));
    const nodes = es.spec.replicas;
    expect(nodes).toBe(3);
    const headless = ofKind('Service').find((s) => s.metadata.name === es.spec.serviceName);
    expect(headless.spec.clusterIP).toBe('None');
    expect(es.spec.volumeClaimTemplates.length).toBeGreaterThan(0);
    const env = Object.fromEntries(
      mainContainer(es).env.map((e: any) => [e.name, e.value ?? e.valueFrom]),
    );
    expect(env['discovery.seed_hosts']).toBe(headless.metadata.name);
    expect(env['xpack.security.enabled']).toBeDefined();
    const names = Array.from({ length: nodes }, (_, i) => `${es.metadata.name}-${i}`);
    expect(env['cluster.initial_master_nodes'].split(',')).toEqual(names);
    for (const d of service) {
      const c = loadConfig({
        ELASTICSEARCH_URL: envValue(d, 'ELASTICSEARCH_URL'),
        ELASTICSEARCH_REPLICAS: envValue(d, 'ELASTICSEARCH_REPLICAS'),
      });
      expect(c.ELASTICSEARCH_REPLICAS).toBe(1);
      expect(c.ELASTICSEARCH_REPLICAS).toBeLessThan(nodes);
      expect(c.ELASTICSEARCH_URL.map((u) => new URL(u).hostname).sort()).toEqual(
        names.map((n) => `${n}.${headless.metadata.name}`),
      );
    }
  });
});
