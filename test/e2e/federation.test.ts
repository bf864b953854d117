/**
 * Contract §19: the service is an Apollo Federation 2 subgraph. A shop's own products subgraph,
 * built here, returns VisionItem references `{ organisation, dataset, id }`; an Apollo Gateway
 * composes both (introspecting `_service { sdl }`) and forwards the client's Authorization header,
 * and the client asks an item's metadata and `similar` through it.
 */
import { ApolloGateway, IntrospectAndCompose, RemoteGraphQLDataSource } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginInlineTraceDisabled } from '@apollo/server/plugin/disabled';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSubgraphSchema, printSubgraphSchema } from '@apollo/subgraph';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'graphql';
import { VisionService } from '../../src/services/vision';
import { setupDataset, startTestApp, waitProcessed, type TestApp } from '../helpers/app';
import { gql, type GqlResult } from '../helpers/graphql';
import { startImageServer, type ImageServer } from '../helpers/image-server';

let t: TestApp;
let img: ImageServer;
let ds: Awaited<ReturnType<typeof setupDataset>>;
let other: Awaited<ReturnType<typeof setupDataset>>;
let products: ApolloServer;
let router: ApolloServer<{ authorization?: string }>;
let routerUrl: string;
const N = 205;

/** The shop's catalogue: each product points at an item of a dataset (by the VisionItem key). */
const CATALOGUE = [
  { sku: 'p1', name: 'Red boot', visual: { organisation: 'fedorg', dataset: 'pics', id: 'f-005' } },
  {
    sku: 'p2',
    name: 'Blue boot',
    visual: { organisation: 'fedorg', dataset: 'pics', id: 'f-006' },
  },
  {
    sku: 'p3',
    name: 'Foreign boot',
    visual: { organisation: 'fedother', dataset: 'elsewhere', id: 'o-000' },
  },
  { sku: 'p4', name: 'Lost boot', visual: { organisation: 'fedorg', dataset: 'pics', id: 'none' } },
];

const PRODUCTS_SDL = `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
  type Query {
    products: [Product!]!
    product(sku: ID!): Product
  }
  type Product @key(fields: "sku") {
    sku: ID!
    name: String!
    visual: VisionItem
  }
  type VisionItem @key(fields: "organisation dataset id", resolvable: false) {
    organisation: String!
    dataset: String!
    id: ID!
  }
`;

async function viaRouter<T = any>(query: string, token?: string): Promise<GqlResult<T>> {
  return gql<T, Record<string, never>>(routerUrl, query, {}, token);
}

beforeAll(async () => {
  img = await startImageServer();
  t = await startTestApp({ WORKER_CONCURRENCY: '8' });
  ds = await setupDataset(t, 'fedorg', 'pics');
  other = await setupDataset(t, 'fedother', 'elsewhere');
  const content = Array.from({ length: N }, (_, i) => ({
    id: `f-${String(i).padStart(3, '0')}`,
    url: `${img.url}/img/${i}.png`,
    metadata: { n: i, half: i % 2 ? 'odd' : 'even' },
    privateMetadata: { cost: i },
  }));
  const w = await t.call('POST', `${ds.base}/content`, { token: ds.orgToken, body: { content } });
  expect(w.status).toBe(202);
  const o = await t.call('POST', `${other.base}/content`, {
    token: other.orgToken,
    body: { content: [{ id: 'o-000', url: `${img.url}/img/7.png` }] },
  });
  expect(o.status).toBe(202);
  await waitProcessed(t, ds.base, ds.orgToken, N);
  await waitProcessed(t, other.base, other.orgToken, 1);

  products = new ApolloServer({
    plugins: [ApolloServerPluginInlineTraceDisabled()],
    schema: buildSubgraphSchema({
      typeDefs: parse(PRODUCTS_SDL),
      resolvers: {
        Query: {
          products: () => CATALOGUE,
          product: (_: unknown, { sku }: { sku: string }) =>
            CATALOGUE.find((p) => p.sku === sku) ?? null,
        },
      },
    }),
  });
  const productsUrl = (
    await startStandaloneServer(products, { listen: { port: 0, host: '127.0.0.1' } })
  ).url;

  const gateway = new ApolloGateway({
    supergraphSdl: new IntrospectAndCompose({
      subgraphs: [
        { name: 'vision', url: `${t.url}/graphql` },
        { name: 'products', url: productsUrl },
      ],
    }),
    buildService: ({ url }) =>
      new RemoteGraphQLDataSource<{ authorization?: string }>({
        url,
        // The client's token goes to every subgraph, as a router's header propagation does.
        willSendRequest({ request, context }) {
          if (context.authorization)
            request.http?.headers.set('authorization', context.authorization);
        },
      }),
  });
  // @apollo/gateway implements the gateway interface of Apollo Server 4, which 5 still runs.
  router = new ApolloServer<{ authorization?: string }>({ gateway: gateway as never });
  routerUrl = (
    await startStandaloneServer(router, {
      listen: { port: 0, host: '127.0.0.1' },
      context: async ({ req }) => ({ authorization: req.headers.authorization }),
    })
  ).url.replace(/\/$/, '');
}, 120_000);

afterAll(async () => {
  await router?.stop();
  await products?.stop();
  await t?.stop();
  await img?.close();
});

test('_service { sdl } describes the committed subgraph, VisionItem keyed by organisation, dataset and id', async () => {
  const r = await gql<{ _service: { sdl: string } }, Record<string, never>>(
    t.url,
    '{ _service { sdl } }',
  );
  const sdl = r.data!._service.sdl;
  expect(sdl).toContain('@key(fields: "organisation dataset id")');
  // the same subgraph as the committed SDL, which leaves the federation definitions implicit
  const committed = fs.readFileSync(path.join(__dirname, '../../schema/schema.graphql'), 'utf8');
  expect(committed.endsWith(`${printSubgraphSchema(buildSubgraphSchema(parse(sdl)))}\n`)).toBe(
    true,
  );
});

test("a product's visual: metadata and similar through the router are what the service answers", async () => {
  const routed = await viaRouter(
    `{ product(sku: "p1") { sku name visual { organisation dataset id metadata similar(limit: 3) { id score } } } }`,
    ds.dsToken,
  );
  expect(routed.errors).toBeUndefined();
  const direct = await gql<any, Record<string, never>>(
    t.url,
    `{ vision(organisation: "fedorg", dataset: "pics") {
         details(ids: ["f-005"]) { id metadata }
         similar(id: "f-005", limit: 3) { id score } } }`,
    {},
    ds.dsToken,
  );
  expect(direct.errors).toBeUndefined();
  const { details, similar } = direct.data.vision;
  expect(routed.data.product).toEqual({
    sku: 'p1',
    name: 'Red boot',
    visual: {
      organisation: 'fedorg',
      dataset: 'pics',
      id: 'f-005',
      metadata: details[0].metadata,
      similar,
    },
  });
  expect(similar).toHaveLength(3);
  expect(similar[0]).toEqual({ id: 'f-005', score: 1 });
  expect(details[0].metadata).toMatchObject({ n: 5, half: 'odd' });
  expect(details[0].metadata).not.toHaveProperty('cost');
});

test("references of one request are read in one batch per dataset; one outside the token's reach is null with not_found", async () => {
  const details = jest.spyOn(VisionService.prototype, 'details');
  try {
    const r = await viaRouter(
      `{ products { sku visual { id metadata(fields: ["n"]) } } }`,
      ds.dsToken,
    );
    const bySku = Object.fromEntries(
      (r.data.products as Array<{ sku: string; visual: unknown }>).map((p) => [p.sku, p.visual]),
    );
    expect(bySku).toEqual({
      p1: { id: 'f-005', metadata: { n: 5 } },
      p2: { id: 'f-006', metadata: { n: 6 } },
      p3: null,
      p4: null,
    });
    // f-005, f-006 and none together; the other organisation's dataset on its own
    expect(details.mock.calls.map((c) => [c[1], c[2], [...c[3]].sort()])).toEqual(
      expect.arrayContaining([
        ['fedorg', 'pics', ['f-005', 'f-006', 'none']],
        ['fedother', 'elsewhere', ['o-000']],
      ]),
    );
    expect(details).toHaveBeenCalledTimes(2);
    const codes = (r.errors ?? []).map((e) => e.extensions.code).sort();
    expect(codes).toEqual(['not_found', 'not_found']);
  } finally {
    details.mockRestore();
  }
  // The other organisation's own token reaches its item, through the same router.
  const own = await viaRouter(`{ product(sku: "p3") { visual { id } } }`, other.dsToken);
  expect(own.errors).toBeUndefined();
  expect(own.data.product.visual).toEqual({ id: 'o-000' });
});

test('_entities on the service itself: unreachable and unknown references are null with not_found, in place', async () => {
  const r = await gql<any, { reps: unknown[] }>(
    t.url,
    `query ($reps: [_Any!]!) { _entities(representations: $reps) { ... on VisionItem { id dataset } } }`,
    {
      reps: [
        { __typename: 'VisionItem', organisation: 'fedorg', dataset: 'pics', id: 'f-001' },
        { __typename: 'VisionItem', organisation: 'fedother', dataset: 'elsewhere', id: 'o-000' },
        { __typename: 'VisionItem', organisation: 'fedorg', dataset: 'pics', id: 'none' },
      ],
    },
    ds.dsToken,
  );
  expect(r.data._entities).toEqual([{ id: 'f-001', dataset: 'pics' }, null, null]);
  const errors = (r.errors ?? []).map((e) => [e.path, e.extensions.code, e.extensions.status]);
  expect(errors).toEqual(
    expect.arrayContaining([
      [['_entities', 1], 'not_found', 404],
      [['_entities', 2], 'not_found', 404],
    ]),
  );
  expect(errors).toHaveLength(2);
  // Without a token, the answer is the contract's unauthorized, as for any query.
  const anonymous = await gql<any, { reps: unknown[] }>(
    t.url,
    `query ($reps: [_Any!]!) { _entities(representations: $reps) { ... on VisionItem { id } } }`,
    { reps: [{ __typename: 'VisionItem', organisation: 'fedorg', dataset: 'pics', id: 'f-001' }] },
  );
  expect(anonymous.data._entities).toEqual([null]);
  expect(anonymous.errors?.[0]?.extensions.code).toBe('unauthorized');
});
