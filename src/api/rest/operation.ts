import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { invalid, type ErrorCode, type ErrorDetail } from '../../domain/errors';

/** Who may call an operation (contract §3); documented per operation in /openapi.json. */
type Access = 'none' | 'operator' | 'organisation' | 'dataset';

type Shape = z.ZodObject;

/**
 * One REST operation: its route and the zod schemas that validate its path, query and body and
 * describe its success response. The route is registered from this and /openapi.json is
 * generated from it, so the document cannot describe a request the code does not check.
 */
export interface Operation<
  Q extends Shape = Shape,
  B extends z.ZodType = z.ZodType,
  P = z.output<B>,
> {
  id: string;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Fastify's form: `/orgs/:organisation`. */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  access: Access;
  params?: Shape;
  query?: Q;
  body?: B;
  /** The body may be absent (e.g. track with events only in `v`). */
  bodyOptional?: boolean;
  bodyLimit?: number;
  /**
   * The body's keys are the client's data (metadata): `__proto__` is read as a key like any
   * other, and the domain's check of the whole body (`bodyRule`) replaces the schema's, which
   * skips such a key (zod leaves `__proto__` out of records) and so would not name its problems
   * with the others'.
   */
  dataKeys?: { bodyRule: (body: unknown) => P };
  status: number;
  response: z.ZodType;
  /** Other answers that are not the contract's error body (e.g. /readyz's 503). */
  otherResponses?: Record<number, { description: string; schema: z.ZodType }>;
  /** `text/plain` for the Prometheus exposition; JSON otherwise. */
  responseType?: string;
  /** The contract §2 errors this operation can answer, beyond the ones every route can. */
  errors: ErrorCode[];
  /**
   * The handler checks the token itself (/metrics: a worker-only process has no authentication
   * hook), so the request hook lets it through.
   */
  checksTokenItself?: boolean;
}

export const operation = <Q extends Shape, B extends z.ZodType, P = z.output<B>>(
  op: Operation<Q, B, P>,
) => op;

export interface Input<Q extends Shape, P> {
  params: Record<string, string>;
  query: z.output<Q>;
  /** The body as its schema (or the data-keys rule) parsed it: the command's raw material. */
  body: P;
}

/** Refuses a declared query parameter given more than once (Fastify reads it as an array). */
function refuseRepeated(query: Record<string, unknown>, shape: Shape): void {
  for (const name of Object.keys(shape.shape)) {
    const v = query[name];
    if (Array.isArray(v))
      throw invalid(`${name} is given ${v.length} times; give it once`, [
        { param: name, message: 'repeated' },
      ]);
  }
}

/** Query parameters through their schema; the first problem names the parameter and value. */
function parseQuery<Q extends Shape>(shape: Q | undefined, raw: unknown): z.output<Q> {
  const query = (raw ?? {}) as Record<string, unknown>;
  if (!shape) return {} as z.output<Q>;
  refuseRepeated(query, shape);
  const r = shape.safeParse(query);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const name = String(issue.path[0]);
  const given = query[name];
  throw invalid(
    `${name} ${issue.message}${typeof given === 'string' ? `; got '${given.slice(0, 100)}'` : ''}`,
    [{ param: name, message: issue.message }],
  );
}

/** Wording of zod's own issues in the contract's voice (the schemas word the rest). */
function messageOf(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code === 'invalid_type')
    return issue.input === undefined ? 'required' : `expected ${issue.expected}`;
  if (issue.code === 'unrecognized_keys')
    return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
  if (issue.code === 'too_big') return `at most ${String(issue.maximum)}`;
  if (issue.code === 'too_small') return `at least ${String(issue.minimum)}`;
  return undefined;
}

/**
 * A body issue as a contract §2 detail: an element of a top-level array (`content[3].url`) is
 * named by index, its id when it has one, and the field inside it.
 */
function detailOf(issue: z.core.$ZodIssue, body: unknown): ErrorDetail {
  // An unknown key is named itself, as a missing one is.
  const at = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]] : issue.path;
  const path = at.map(String);
  const [list, index, ...rest] = at;
  if (typeof list === 'string' && typeof index === 'number') {
    const element = (body as Record<string, unknown[]>)[list]?.[index];
    const id = (element as { id?: unknown } | undefined)?.id;
    return {
      index,
      ...(typeof id === 'string' ? { id: id.slice(0, 120) } : {}),
      field: rest.length ? rest.map(String).join('.') : list,
      message: issue.message,
    };
  }
  return { field: path.join('.') || 'body', message: issue.message };
}

/** The body through its schema; an absent optional body stays undefined. */
function parseBody<B extends z.ZodType, P>(
  op: Operation<Shape, B, P>,
  body: unknown,
): z.output<B> | undefined {
  if (!op.body || (op.bodyOptional && (body === undefined || body === null))) return undefined;
  const r = op.body.safeParse(body, { error: messageOf });
  if (r.success) return r.data;
  const details = r.error.issues.map((i) => detailOf(i, body));
  throw invalid(`request body is invalid: ${details[0].field}: ${details[0].message}`, details);
}

/** Registers an operation: its schemas run before the handler, whose result is the body. */
export function serve<Q extends Shape, B extends z.ZodType, P>(
  app: FastifyInstance,
  op: Operation<Q, B, P>,
  handler: (input: Input<Q, P>, req: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
): void {
  app.route({
    method: op.method,
    url: op.path,
    ...(op.bodyLimit ? { bodyLimit: op.bodyLimit } : {}),
    config: {
      public: op.access === 'none' || op.checksTokenItself === true,
      dataKeys: op.dataKeys !== undefined,
    },
    handler: async (req, reply) => {
      const query = parseQuery(op.query, req.query);
      const body = op.dataKeys ? op.dataKeys.bodyRule(req.body) : parseBody(op, req.body);
      const out = await handler(
        { params: req.params as Record<string, string>, query, body: body as P },
        req,
        reply,
      );
      if (op.responseType) reply.type(op.responseType);
      // A handler may answer another documented status (otherResponses).
      if (reply.statusCode === 200) reply.status(op.status);
      return reply.send(out);
    },
  });
}
