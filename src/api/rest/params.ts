import type { FastifyRequest } from 'fastify';
import { invalid } from '../../domain/errors';

type Query = Record<string, string | string[] | undefined>;

/** A query parameter given at most once. */
export function str(req: FastifyRequest, name: string): string | undefined {
  const v = (req.query as Query)[name];
  if (Array.isArray(v))
    throw invalid(`${name} is given ${v.length} times; give it once`, [
      { param: name, message: 'repeated' },
    ]);
  return v;
}

/** An integer query parameter; bounds are the service's business. */
export function int(req: FastifyRequest, name: string): number | undefined {
  const v = str(req, name);
  if (v === undefined || v === '') return undefined;
  if (!/^-?\d{1,15}$/.test(v.trim()))
    throw invalid(`${name} must be an integer; got '${v}'`, [
      { param: name, message: 'expected an integer' },
    ]);
  return Number(v);
}

export const param = (req: FastifyRequest, name: string): string =>
  (req.params as Record<string, string>)[name];

/** A boolean query parameter: `true` or `false`. */
export function bool(req: FastifyRequest, name: string): boolean | undefined {
  const v = str(req, name);
  if (v === undefined || v === '') return undefined;
  if (v !== 'true' && v !== 'false')
    throw invalid(`${name} must be true or false; got '${v}'`, [
      { param: name, message: 'expected true or false' },
    ]);
  return v === 'true';
}
