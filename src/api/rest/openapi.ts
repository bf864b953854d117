import { z } from 'zod';
import { STATUS_BY_CODE, type ErrorCode } from '../../domain/errors';
import type { Operation } from './operation';
import * as accountOps from './schema/account-ops';
import * as contentOps from './schema/content-ops';
import * as serviceOps from './schema/service-ops';
import { errorBody } from './schema/shapes';
import * as visionOps from './schema/vision-ops';
import * as webhookOps from './schema/webhook-ops';
import * as duplicateOps from './schema/duplicate-ops';

/** Every REST operation; routes are registered from these and the document is made of them. */
const OPERATIONS: readonly Operation[] = [
  ...Object.values(serviceOps),
  ...Object.values(accountOps),
  ...Object.values(contentOps),
  ...Object.values(visionOps),
  ...Object.values(webhookOps),
  ...Object.values(duplicateOps),
] as Operation[];

type Json = Record<string, unknown>;

const REF = '#/components/schemas/';

/**
 * A JSON Schema (2020-12, OpenAPI 3.1's dialect) of a zod schema, its named parts moved into
 * `components` and referenced from there.
 */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output', components: Json): Json {
  const out = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' });
  const { $schema: _dialect, $defs, ...rest } = out as Json & { $defs?: Json };
  Object.assign(components, rebase($defs ?? {}));
  return rebase(rest) as Json;
}

function rebase(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rebase);
  if (typeof node !== 'object' || node === null) return node;
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => [
      k,
      k === '$ref' && typeof v === 'string' ? v.replace('#/$defs/', REF) : rebase(v),
    ]),
  );
}

/** Errors any operation can answer, by who may call it and whether it takes a body. */
function errorsOf(op: Operation): ErrorCode[] {
  const codes = new Set<ErrorCode>(op.errors);
  if (op.query) codes.add('invalid_request');
  if (op.body)
    ['invalid_request', 'payload_too_large', 'unsupported_media_type'].forEach((c) =>
      codes.add(c as ErrorCode),
    );
  if (op.access !== 'none')
    ['unauthorized', 'forbidden', 'unsupported_version', 'rate_limited'].forEach((c) =>
      codes.add(c as ErrorCode),
    );
  if (op.access === 'dataset') codes.add('token_expired');
  codes.add('internal');
  codes.add('unavailable');
  return [...codes];
}

const ACCESS_TEXT: Record<Operation['access'], string> = {
  none: 'No token.',
  operator: 'The operator token.',
  organisation: 'An organisation token of this organisation.',
  dataset: 'The dataset’s browse token, or a scoped token made with its key (contract §16).',
};

function pathItem(op: Operation, components: Json): Json {
  const parameters: Json[] = [];
  for (const [where, shape] of [
    ['path', op.params],
    ['query', op.query],
  ] as const) {
    if (!shape) continue;
    const doc = jsonSchema(shape, 'input', components) as {
      properties?: Json;
      required?: string[];
    };
    for (const [name, schema] of Object.entries(doc.properties ?? {})) {
      const { description, ...rest } = schema as Json;
      parameters.push({
        name,
        in: where,
        required: where === 'path' || (doc.required ?? []).includes(name),
        ...(description ? { description } : {}),
        schema: rest,
      });
    }
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorsOf(op)) {
    const status = STATUS_BY_CODE[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Json = {
    [op.status]: {
      description: op.summary,
      content: {
        [op.responseType ?? 'application/json']: {
          schema: jsonSchema(op.response, 'output', components),
        },
      },
    },
  };
  for (const [status, other] of Object.entries(op.otherResponses ?? {}))
    responses[status] = {
      description: other.description,
      content: { 'application/json': { schema: jsonSchema(other.schema, 'output', components) } },
    };
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b))
    responses[status] ??= {
      description: codes.join(', '),
      content: { 'application/json': { schema: { $ref: `${REF}Error` } } },
    };
  return {
    operationId: op.id,
    summary: op.summary,
    description: [op.description, ACCESS_TEXT[op.access]].filter(Boolean).join('\n\n'),
    tags: [op.tag],
    ...(op.access === 'none' ? { security: [] } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(op.body
      ? {
          requestBody: {
            required: !op.bodyOptional,
            content: { 'application/json': { schema: jsonSchema(op.body, 'input', components) } },
          },
        }
      : {}),
    responses,
  };
}

/** Fastify's `:name` path segments as OpenAPI's `{name}`. */
const openApiPath = (path: string): string => path.replace(/:(\w+)/g, '{$1}');

/** The OpenAPI 3.1 document of every REST operation (contract §12). */
export function openApiDocument(version: string): Json {
  const components: Json = {};
  jsonSchema(errorBody, 'output', components);
  const paths: Record<string, Json> = {};
  for (const op of OPERATIONS) {
    const item = (paths[openApiPath(op.path)] ??= {});
    item[op.method.toLowerCase()] = pathItem(op, components);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Visual search service',
      version,
      description:
        'REST interface of interface.md and contract.md. Errors answer the contract §2 body; every response carries X-Request-Id.',
    },
    servers: [{ url: '/' }],
    security: [{ token: [] }],
    tags: ['operations', 'organisations', 'datasets', 'content', 'vision'].map((name) => ({
      name,
    })),
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        token: {
          type: 'apiKey',
          in: 'header',
          name: 'Authorization',
          description: '`token <TOKEN>` (interface: Authentication)',
        },
      },
    },
  };
}
