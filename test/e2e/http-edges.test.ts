/**
 * HTTP edges of the REST transport: refused bodies are answered rather than reset, the rate limit
 * follows the caller rather than the header's text, everything refused before a route runs
 * carries the contract's error body, and the original vendor's curl samples (JSON sent without a
 * JSON Content-Type) work.
 */
import http from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
import { LIMITS } from '../../src/domain/limits';
import { AddContentDocument } from '../graphql/generated';
import { OPERATOR, setupDataset, startTestApp, type TestApp } from '../helpers/app';
import { gql, onlyError } from '../helpers/graphql';

let t: TestApp;
let acme: Awaited<ReturnType<typeof setupDataset>>;

beforeAll(async () => {
  t = await startTestApp();
  acme = await setupDataset(t, 'acme', 'shoes');
});
afterAll(() => t.stop());

interface RawResponse {
  status?: number;
  headers: Record<string, string>;
  body?: any;
  /** A socket error (EPIPE, ECONNRESET) before the response could be read. */
  error?: string;
}

/**
 * As curl does it: write the request head and the whole body, and only then read the answer.
 * A server that closes while the body is still coming makes this fail (the kernel discards what
 * was received when the reset arrives), which is what the clients in issue 14 saw.
 */
function rawRequest(url: string, head: string, body: Buffer | string = ''): Promise<RawResponse> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    const s = net.connect(Number(port), '127.0.0.1');
    let buf = Buffer.alloc(0);
    let error: string | undefined;
    const done = (): void => {
      const text = buf.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return resolve({ headers: {}, error: error ?? 'no response' });
      const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((l) => [
          l.slice(0, l.indexOf(':')).toLowerCase(),
          l.slice(l.indexOf(':') + 1).trim(),
        ]),
      );
      const raw = buf.subarray(Buffer.byteLength(text.slice(0, end + 4), 'latin1')).toString();
      let parsed: unknown = raw;
      try {
        parsed = JSON.parse(raw);
      } catch {
        /* not JSON */
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: parsed, error });
    };
    const complete = (): boolean => {
      const text = buf.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, end));
      return end >= 0 && !!length && buf.length >= end + 4 + Number(length[1]);
    };
    s.on('error', (e: NodeJS.ErrnoException) => {
      error = e.code ?? e.message;
      done();
    });
    s.on('close', done);
    // A response without Content-Length ends when the server closes; do not wait for ever.
    s.setTimeout(10_000, () => s.destroy());
    s.write(head);
    s.write(body, (err) => {
      if (err) return;
      s.on('data', (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        if (complete()) s.destroy();
      });
    });
  });
}

const MB = 1024 * 1024;
/** Past the limit of every route (6 MB, the size issue 14 tried). */
const SIX_MB = Buffer.alloc(LIMITS.requestBodyBytes + MB, 'a');
const inMB = (bytes: number) => `${bytes / MB} MB`;

const post = (path: string, token: string, length: number, extra = ''): string =>
  `POST ${path} HTTP/1.1\r\nHost: test\r\nAuthorization: token ${token}\r\n` +
  `Content-Type: application/json\r\nContent-Length: ${length}\r\n${extra}\r\n`;

/** The contract §2 body, with the request id the X-Request-Id header carries. */
function expectContractError(r: RawResponse, status: number, code: string): void {
  expect(r.error).toBeUndefined();
  expect(r.status).toBe(status);
  expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(r.body).toMatchObject({ status: 'error', error: { code, message: expect.any(String) } });
  expect(r.headers['x-request-id']).toEqual(expect.any(String));
  expect(r.body.error.request_id).toBe(r.headers['x-request-id']);
}

describe('a refused body is read before the answer, so every client sees it', () => {
  test('6 MB to a content route and to another route: 413, 5 times of 5', async () => {
    for (const path of [`${acme.base}/content`, '/orgs']) {
      for (let i = 0; i < 5; i++) {
        const r = await rawRequest(t.url, post(path, OPERATOR, SIX_MB.length), SIX_MB);
        expectContractError(r, 413, 'payload_too_large');
      }
    }
  });

  test('a chunked body that grows past the limit: 413', async () => {
    const head =
      `POST /orgs HTTP/1.1\r\nHost: test\r\nAuthorization: token ${OPERATOR}\r\n` +
      'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
    const chunk = Buffer.alloc(MB, 'a');
    const framed = Buffer.concat([
      ...Array.from({ length: SIX_MB.length / MB }, () =>
        Buffer.concat([
          Buffer.from(`${chunk.length.toString(16)}\r\n`),
          chunk,
          Buffer.from('\r\n'),
        ]),
      ),
      Buffer.from('0\r\n\r\n'),
    ]);
    expectContractError(await rawRequest(t.url, head, framed), 413, 'payload_too_large');
  });

  test('Node clients streaming the body, with and without keep-alive: 413 and no EPIPE, 5 of 5', async () => {
    const keepAlive = new http.Agent({ keepAlive: true });
    // Like piping a file: the body goes out in chunks, so a closed connection fails a write.
    const send = (path: string, agent: http.Agent | false) =>
      new Promise<{ status?: number; body?: any; error?: string }>((resolve) => {
        const r: { status?: number; body?: any; error?: string } = {};
        const req = http.request(`${t.url}${path}`, {
          method: 'POST',
          agent,
          headers: {
            authorization: `token ${OPERATOR}`,
            'content-type': 'application/json',
            'content-length': SIX_MB.length,
          },
        });
        req.on('error', (e: NodeJS.ErrnoException) => (r.error ??= e.code));
        req.on('response', (res) => {
          r.status = res.statusCode;
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => (r.body = JSON.parse(text)));
        });
        req.on('close', () => setImmediate(() => resolve(r)));
        Readable.from(
          (function* () {
            for (let o = 0; o < SIX_MB.length; o += 64 * 1024)
              yield SIX_MB.subarray(o, o + 64 * 1024);
          })(),
        ).pipe(req);
      });
    try {
      for (const path of [`${acme.base}/content`, '/orgs'])
        for (const agent of [false as const, keepAlive])
          for (let i = 0; i < 5; i++) {
            const r = await send(path, agent);
            expect(r.error).toBeUndefined();
            expect(r.status).toBe(413);
            expect(r.body?.error.code).toBe('payload_too_large');
          }
    } finally {
      keepAlive.destroy();
    }
  });

  test('a body refused for its token is read too: 401, not a reset', async () => {
    const r = await rawRequest(t.url, post('/orgs', 'not-a-token', SIX_MB.length), SIX_MB);
    expectContractError(r, 401, 'unauthorized');
  });

  test('the 413 names the limit of the endpoint', async () => {
    for (const path of ['/orgs', `${acme.base}/content`, '/graphql']) {
      const r = await rawRequest(t.url, post(path, OPERATOR, SIX_MB.length), SIX_MB);
      expect([path, r.body.error.message]).toEqual([
        path,
        `request body is larger than the ${inMB(LIMITS.requestBodyBytes)} this endpoint accepts`,
      ]);
    }
    const lens = await rawRequest(
      t.url,
      post(`${acme.base}/search`, acme.dsToken, SIX_MB.length),
      SIX_MB,
    );
    expect(lens.body.error.message).toBe(
      `request body is larger than the ${LIMITS.lensBodyBytes / 1024} KB this endpoint accepts`,
    );
  });

  test('the GraphQL route and the lens route: 6 MB is 413 with the contract body, 5 times of 5', async () => {
    for (const [path, token] of [
      ['/graphql', acme.orgToken],
      [`${acme.base}/search`, acme.dsToken],
    ]) {
      for (let i = 0; i < 5; i++) {
        const r = await rawRequest(t.url, post(path, token, SIX_MB.length), SIX_MB);
        expectContractError(r, 413, 'payload_too_large');
      }
    }
  });

  test('only lens takes less than 5 MB (contract §2, §7): a 2 MB track batch is accepted, lens just past its limit is 413', async () => {
    // 1,000 events of 2 KB each: a legitimate body above 1 MB and within the limit
    const v = `a:click,id:sku-1,note:${'x'.repeat(LIMITS.vMaxLength - 30)}`;
    const events = Array.from({ length: LIMITS.trackMaxEvents }, () => ({ v }));
    const body = JSON.stringify({ events });
    expect(body.length).toBeGreaterThan(1.9 * MB); // twice the 1 MB routes once refused
    expect(body.length).toBeLessThanOrEqual(LIMITS.requestBodyBytes);
    const track = await rawRequest(
      t.url,
      post(`${acme.base}/track`, acme.dsToken, body.length),
      body,
    );
    expect([track.status, track.body]).toEqual([202, { status: 'accepted' }]);
    const atLimit = Buffer.alloc(LIMITS.requestBodyBytes, ' ');
    const orgs = await rawRequest(t.url, post('/orgs', OPERATOR, atLimit.length), atLimit);
    expectContractError(orgs, 400, 'invalid_request'); // read whole, then refused as JSON
    const overLens = Buffer.alloc(LIMITS.lensBodyBytes + 1, ' ');
    expectContractError(
      await rawRequest(t.url, post(`${acme.base}/search`, acme.dsToken, overLens.length), overLens),
      413,
      'payload_too_large',
    );
  });

  test('a body declared beyond what is worth reading is answered at once, and the connection closed', async () => {
    const r = await rawRequest(
      t.url,
      post('/orgs', OPERATOR, LIMITS.refusedBodyDrainBytes + LIMITS.requestBodyBytes),
    );
    expectContractError(r, 413, 'payload_too_large');
    expect(r.headers.connection).toBe('close');
  });
});

describe('the rate limit follows the caller, not the text of its header', () => {
  // Rate limits are kept per API process: one process here, whatever the engine.
  const limited = () => startTestApp({ RATE_LIMIT_PER_MINUTE: '3', APP_ROLES: 'api,worker' });

  test('changing the case of "token" or adding spaces does not give a fresh allowance', async () => {
    const l = await limited();
    try {
      const statuses = [];
      for (const authorization of [
        `token ${OPERATOR}`,
        `TOKEN ${OPERATOR}`,
        `Token    ${OPERATOR}   `,
        `tOkEn\t${OPERATOR}`,
      ])
        statuses.push((await l.call('GET', '/orgs/x', { headers: { authorization } })).status);
      expect(statuses).toEqual([404, 404, 404, 429]);
    } finally {
      await l.stop();
    }
  });

  test('failed authentications are limited per client address; valid tokens still pass', async () => {
    const l = await limited();
    try {
      const bad = ['token nope-1', 'token nope-2', 'Bearer x', 'token org_AAAAAAAAAAAA_B'];
      const r = [];
      for (const authorization of bad)
        r.push(await l.call('GET', '/orgs/x', { headers: { authorization } }));
      expect(r.map((x) => x.status)).toEqual([401, 401, 401, 429]);
      expect(r[3].body.error.code).toBe('rate_limited');
      expect(r[3].body.error.message).toMatch(/failed authentications/);
      expect(Number(r[3].headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await l.call('GET', '/orgs/x')).status).toBe(429); // no header is a failure too
      expect((await l.call('GET', '/orgs/x', { token: OPERATOR })).status).toBe(404);
    } finally {
      await l.stop();
    }
  });
});

test('bad tokens on /metrics count as failed authentications too (no guessing the operator token there)', async () => {
  const l = await startTestApp({ RATE_LIMIT_PER_MINUTE: '3', APP_ROLES: 'api,worker' });
  try {
    const statuses = [];
    for (const n of [1, 2, 3, 4])
      statuses.push(
        (await l.call('GET', '/metrics', { headers: { authorization: `token op_guess${n}` } }))
          .status,
      );
    expect(statuses).toEqual([401, 401, 401, 429]);
  } finally {
    await l.stop();
  }
});

describe('errors raised before a route runs carry the contract body and X-Request-Id', () => {
  const get = (path: string, extra = '') =>
    `GET ${path} HTTP/1.1\r\nHost: test\r\nAuthorization: token ${OPERATOR}\r\n${extra}\r\n`;

  test('431 for request headers too large (answered by the HTTP parser hook)', async () => {
    const r = await rawRequest(t.url, get('/healthz', `X-Padding: ${'a'.repeat(20_000)}\r\n`));
    expectContractError(r, 431, 'invalid_request');
    expect(r.body.error.message).toMatch(/headers are larger than/);
  });

  test('400 for an unknown method; 404 for CONNECT and for a method a route does not take', async () => {
    const foo = await rawRequest(t.url, `FOO /orgs HTTP/1.1\r\nHost: test\r\n\r\n`);
    expectContractError(foo, 400, 'invalid_request');
    expect(foo.body.error.message).toBe('unknown HTTP method');
    const connect = await rawRequest(
      t.url,
      'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
    );
    expectContractError(connect, 404, 'not_found');
    const patch = await rawRequest(
      t.url,
      `PATCH /orgs HTTP/1.1\r\nHost: test\r\nAuthorization: token ${OPERATOR}\r\nContent-Length: 0\r\n\r\n`,
    );
    expectContractError(patch, 404, 'not_found');
    expect(patch.body.error.message).toBe('no route PATCH /orgs');
  });

  test('400 for a broken URL, an overlong path segment, a missing Host, a bad Content-Length', async () => {
    const badUrl = await rawRequest(t.url, get('/orgs/%ZZ'));
    expectContractError(badUrl, 400, 'invalid_request');
    expect(badUrl.body.error.message).toMatch(/percent-encoding/);
    expectContractError(
      await rawRequest(t.url, get(`/orgs/${'a'.repeat(200)}`)),
      400,
      'invalid_request',
    );
    const noHost = await rawRequest(t.url, `GET /healthz HTTP/1.1\r\n\r\n`);
    expectContractError(noHost, 400, 'invalid_request');
    expect(noHost.body.error.message).toMatch(/Host/);
    const badLength = await rawRequest(
      t.url,
      `${post('/orgs', OPERATOR, 0).replace('Content-Length: 0', 'Content-Length: abc')}`,
    );
    expectContractError(badLength, 400, 'invalid_request');
    expect(badLength.body.error.message).toMatch(/Content-Length/);
  });

  test('417 for an Expect header other than 100-continue', async () => {
    const r = await rawRequest(t.url, get('/healthz', 'Expect: something-else\r\n'));
    expectContractError(r, 417, 'invalid_request');
  });

  test('malformed JSON is 400 naming the position; an empty body 400; a poisoned one 400', async () => {
    const broken = '{"name":"x",}';
    const r = await rawRequest(t.url, post('/orgs', OPERATOR, broken.length), broken);
    expectContractError(r, 400, 'invalid_request');
    expect(r.body.error.message).toMatch(/^body is not valid JSON: /);
    expect(r.body.error.details).toEqual([{ position: 12, message: expect.any(String) }]);
    const truncated = '{"name":';
    const cut = await rawRequest(t.url, post('/orgs', OPERATOR, truncated.length), truncated);
    expect(cut.body.error.details).toEqual([{ position: 8, message: expect.any(String) }]);
    const empty = await rawRequest(t.url, post('/orgs', OPERATOR, 0));
    expectContractError(empty, 400, 'invalid_request');
    expect(empty.body.error.message).toBe('body is empty; expected JSON');
    const poisoned = '{"name":"x","__proto__":{"admin":true}}';
    const p = await rawRequest(t.url, post('/orgs', OPERATOR, poisoned.length), poisoned);
    expectContractError(p, 400, 'invalid_request');
    expect(p.body.error.message).toMatch(/__proto__/);
  });

  test('415 names the type refused; a malformed Content-Type is 415 too', async () => {
    const plain = await t.call('POST', '/orgs', {
      token: OPERATOR,
      raw: '{"name":"x"}',
      headers: { 'content-type': 'text/plain' },
    });
    expect(plain.status).toBe(415);
    expect(plain.body.error).toMatchObject({ code: 'unsupported_media_type' });
    expect(plain.body.error.message).toContain("'text/plain'");
    expect(plain.body.error.request_id).toBe(plain.headers.get('x-request-id'));
    const malformed = await t.call('POST', '/orgs', {
      token: OPERATOR,
      raw: '{"name":"x"}',
      headers: { 'content-type': ';;' },
    });
    expect(malformed.status).toBe(415);
    expect(malformed.body.error.code).toBe('unsupported_media_type');
  });

  test('a vendor JSON type with a charset parameter is JSON', async () => {
    const r = await t.call('POST', '/orgs', {
      token: OPERATOR,
      raw: JSON.stringify({ name: 'vendorco' }),
      headers: { 'content-type': 'application/vnd.visii.v2+json; charset=utf-8' },
    });
    expect(r.status).toBe(201);
  });
});

describe("the vendor's curl samples: JSON without a JSON Content-Type (contract §1)", () => {
  const fields = `${'/orgs/acme/datasets/shoes'}/settings/fields`;
  // A Buffer body makes fetch send no Content-Type at all.
  const noType = (json: string) => Buffer.from(json);

  test('settings/fields with no Content-Type, and with curl’s form type, is read as JSON', async () => {
    const none = await t.call('PUT', fields, {
      token: acme.orgToken,
      raw: noType('{"fields":{"sizes":["s"]}}'),
    });
    expect(none.status).toBe(200);
    expect(none.body.dataset.settings.fields).toEqual({ sizes: ['s'] });
    const form = await t.call('PUT', fields, {
      token: acme.orgToken,
      raw: '{"fields":{"sizes":["m"]}}',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(200);
    expect(form.body.dataset.settings.fields).toEqual({ sizes: ['m'] });
  });

  test('lens with no Content-Type reaches the endpoint like a JSON one', async () => {
    const body = JSON.stringify({ image: 'data:image/png;base64,AAAA' });
    const asJson = await t.call('POST', `${acme.base}/search`, {
      token: acme.dsToken,
      raw: body,
      headers: { 'content-type': 'application/json' },
    });
    const untyped = await t.call('POST', `${acme.base}/search`, {
      token: acme.dsToken,
      raw: noType(body),
    });
    expect(untyped.status).not.toBe(415);
    expect(untyped.status).toBe(asJson.status);
    expect(untyped.body.error?.code).toBe(asJson.body.error?.code);
  });

  test('a body without a JSON type that is not JSON is 415', async () => {
    const none = await t.call('PUT', fields, { token: acme.orgToken, raw: noType('sizes=s') });
    expect(none.status).toBe(415);
    expect(none.body.error.code).toBe('unsupported_media_type');
    const form = await t.call('PUT', fields, {
      token: acme.orgToken,
      raw: 'sizes=s&colors=red',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(415);
    expect(form.body.error.message).toContain('application/x-www-form-urlencoded');
  });
});

describe('ids holding a lone UTF-16 surrogate are refused (not Unicode text)', () => {
  const LONE = ['a\uD800b', '\uDC00', 'x\uDC00\uD800y'];
  const url = 'http://img.test/a.png';
  const listed = async () =>
    (
      (await t.call('GET', `${acme.base}/content?limit=1000`, { token: acme.orgToken })).body
        .content as Array<{ id: string }>
    ).map((c) => c.id);

  test('REST: 400 naming the item by index and its id field; nothing of the batch stored', async () => {
    for (const id of LONE) {
      // as a client sends it: JSON escapes (JSON.stringify writes "a\ud800b" for "a\uD800b")
      const raw = `{"content":[{"id":"kept-out","url":"${url}"},{"id":${JSON.stringify(id)},"url":"${url}"}]}`;
      expect(raw).toMatch(/\\ud[89a-f][0-9a-f]{2}/);
      const r = await t.call('POST', `${acme.base}/content`, {
        token: acme.orgToken,
        raw,
        headers: { 'content-type': 'application/json' },
      });
      expect([id, r.status, r.body.error?.code]).toEqual([id, 400, 'invalid_request']);
      expect(r.body.error.details).toEqual([
        { index: 1, id, field: 'id', message: expect.stringMatching(/lone UTF-16 surrogate/) },
      ]);
    }
    expect((await listed()).filter((id) => ['kept-out', ...LONE].includes(id))).toEqual([]);
  });

  test('GraphQL addContent: the same 400 and details; a well-formed pair is an ordinary id', async () => {
    for (const id of LONE) {
      const r = await gql(
        t.url,
        AddContentDocument,
        {
          organisation: 'acme',
          dataset: 'shoes',
          items: [
            { id: 'kept-out', url },
            { id, url },
          ],
        },
        acme.orgToken,
      );
      const e = onlyError(r);
      expect([id, e.extensions.code, e.extensions.status]).toEqual([id, 'invalid_request', 400]);
      expect(e.extensions.details).toEqual([
        { index: 1, id, field: 'id', message: expect.stringMatching(/lone UTF-16 surrogate/) },
      ]);
    }
    expect((await listed()).filter((id) => ['kept-out', ...LONE].includes(id))).toEqual([]);
    const pair = await gql(
      t.url,
      AddContentDocument,
      { organisation: 'acme', dataset: 'shoes', items: [{ id: 'ok-😀', url }] },
      acme.orgToken,
    );
    expect(pair.data?.addContent.accepted).toBe(1);
    expect(await listed()).toContain('ok-😀');
  });
});
