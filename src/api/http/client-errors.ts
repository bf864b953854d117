import http from 'node:http';
import type { Duplex } from 'node:stream';
import { AppError } from '../../domain/errors';
import { errorBody } from './errors';
import { requestIdFrom } from './request-id';

/**
 * Requests Node's HTTP parser refuses before Fastify sees them (headers too large, unknown
 * method, broken framing) and those Node answers itself: answered here with the contract's
 * error body, since Node's and Fastify's defaults send their own shape or nothing.
 */

/** After answering, the client gets this long to read the answer and hang up. */
const LINGER_MS = 2_000;
const RAW_REQUEST_ID = /\r\nx-request-id:[ \t]*([A-Za-z0-9._-]{1,64})[ \t]*\r\n/i;

interface ParserError extends Error {
  code?: string;
  reason?: string;
  /** What had been read of the request (a Buffer at run time). */
  rawPacket?: unknown;
}

/** The status line and the contract error for a parser error. */
function describe(err: ParserError): { status: number; error: AppError } {
  const bad = (status: number, message: string) => ({
    status,
    error: new AppError('invalid_request', message),
  });
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return bad(431, `request headers are larger than ${http.maxHeaderSize} bytes in total`);
    case 'HPE_INVALID_METHOD':
      return bad(400, 'unknown HTTP method');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return bad(408, 'the request was not received in time');
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return bad(400, 'invalid Content-Length header');
    default:
      return bad(400, `malformed HTTP request (${err.reason ?? err.code ?? 'unreadable'})`);
  }
}

/** Writes one complete error response on a socket no HTTP response object owns, then closes. */
export function writeRawError(
  socket: Duplex,
  status: number,
  error: AppError,
  requestId: string,
): void {
  const body = JSON.stringify(errorBody(error, requestId));
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
  // end() only half-closes: a client still sending would keep the socket open forever.
  const linger = setTimeout(() => socket.destroy(), LINGER_MS).unref();
  socket.once('close', () => clearTimeout(linger));
}

const answered = new WeakSet<Duplex>();

/** Fastify's clientErrorHandler. */
export function answerClientError(err: ParserError, socket: Duplex): void {
  // A reset or closed connection has no one to answer.
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  // The parser reports again for every further chunk the client sends: answer once.
  if (answered.has(socket)) return;
  answered.add(socket);
  const { status, error } = describe(err);
  const raw = Buffer.isBuffer(err.rawPacket) ? err.rawPacket.toString('latin1') : '';
  const sent = RAW_REQUEST_ID.exec(raw)?.[1];
  writeRawError(socket, status, error, requestIdFrom(sent));
}

/**
 * What Node answers itself when no one listens: CONNECT (the connection is closed without a word)
 * and an Expect header other than 100-continue (a bare 417).
 */
export function answerUnrouted(server: http.Server): void {
  server.on('connect', (req: http.IncomingMessage, socket: Duplex) => {
    writeRawError(
      socket,
      404,
      new AppError('not_found', `no route CONNECT ${req.url ?? ''}; this is not a proxy`),
      requestIdFrom(req.headers['x-request-id']),
    );
  });
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const id = requestIdFrom(req.headers['x-request-id']);
    const e = new AppError('invalid_request', `Expect: ${req.headers.expect} is not supported`);
    const body = JSON.stringify(errorBody(e, id));
    res
      .writeHead(417, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'X-Request-Id': id,
        Connection: 'close',
      })
      .end(body);
  });
}
