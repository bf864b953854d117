/**
 * Stopping the service finishes while clients still hold connections to it: one accepted whose
 * request has not arrived (a browser's preconnect, a pool's spare socket) and one whose request
 * is being answered as the stop begins. Node's server.close() waits for both: the first for as
 * long as the client keeps it, the second for the keep-alive timeout (72 s) after its answer.
 */
import net from 'node:net';
import { OPERATOR, startTestApp, type TestApp } from '../helpers/app';

let t: TestApp | undefined;
const sockets: net.Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await t?.stop();
  t = undefined;
});

/** A raw connection to the service, so the test decides when (and whether) bytes are sent. */
async function connect(url: string): Promise<net.Socket> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  sockets.push(socket);
  await new Promise<void>((resolve, reject) =>
    socket.once('connect', resolve).once('error', reject),
  );
  return socket;
}

/** Resolves when `p` does; rejects if that takes longer than `ms`. */
async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not finish in ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const ended = (socket: net.Socket): Promise<void> =>
  new Promise((resolve) => {
    if (socket.closed) resolve();
    else socket.once('close', () => resolve());
  });

test('a connection whose request has not arrived does not hold the stop', async () => {
  t = await startTestApp();
  const idle = await connect(t.url);
  // the accept has reached the server: it answers a request on another connection after it
  expect((await t.call('GET', '/healthz')).status).toBe(200);

  await within(5000, 'stop', t.stop());
  await within(1000, 'the server closing the connection', ended(idle));
});

test('a request being answered as the stop begins is answered, then its connection closes', async () => {
  t = await startTestApp();
  const socket = await connect(t.url);
  const body = JSON.stringify({ name: 'lateorg' });
  let answer = '';
  socket.setEncoding('latin1').on('data', (d: string) => (answer += d));
  const begun = new Promise((resolve) => t!.app.server!.server.once('request', resolve));
  // The headers and half the body now: the server begins the request and waits for the rest.
  socket.write(
    'POST /orgs HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n' +
      `Authorization: token ${OPERATOR}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
  );
  await begun;

  const stopping = t.stop();
  socket.write(body.slice(5));
  await within(5000, 'stop', stopping);
  await within(1000, 'the server closing the connection', ended(socket));
  expect(answer).toMatch(/^HTTP\/1\.1 201 /);
  expect(answer).toMatch(/\r\nconnection: close\r\n/i);
});
