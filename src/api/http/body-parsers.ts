import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError, invalid } from '../../domain/errors';

type Done = (err: Error | null, body?: unknown) => void;
type Parser = (req: FastifyRequest, body: string, done: Done) => void;

/** Vendor media types (`application/vnd.visii.v2+json`), with or without parameters. */
const JSON_SUFFIX = /^application\/[a-z0-9.+-]*\+json(?:\s*;|$)/i;
/** What curl sends for `-d` when the command gives no Content-Type (contract §1). */
const FORM = 'application/x-www-form-urlencoded';

const notJson = (type: string | undefined): AppError =>
  new AppError(
    'unsupported_media_type',
    type === undefined
      ? 'request body has no Content-Type and is not JSON; send JSON (Content-Type: application/json)'
      : `request body of type '${type.slice(0, 100)}' is not accepted; send JSON (Content-Type: application/json)`,
  );

const parses = (body: string): boolean => {
  try {
    JSON.parse(body);
    return true;
  } catch {
    return false;
  }
};

/** Why a body Fastify's parser refused is not acceptable JSON, with the position when V8 gives one. */
function jsonProblem(body: string): AppError {
  try {
    JSON.parse(body);
  } catch (e) {
    const message = (e as Error).message;
    const at = /at position (\d+)/.exec(message)?.[1];
    const position =
      at !== undefined ? Number(at) : /end of JSON input/.test(message) ? body.length : undefined;
    return invalid(`body is not valid JSON: ${message}`, [
      position === undefined ? { message } : { position, message },
    ]);
  }
  // It is JSON, so the parser refused a __proto__ or constructor.prototype key.
  return invalid('body contains a forbidden key (__proto__ or constructor.prototype)');
}

/**
 * JSON for application/json and every +json type; and, for the original vendor's curl samples,
 * for a body with no Content-Type or curl's form type when it parses as JSON (else 415). Anything
 * else is 415. Fastify's own JSON parser stays underneath, for its prototype-poisoning checks.
 */
export function registerBodyParsers(app: FastifyInstance): void {
  const poisonChecked = app.getDefaultJsonParser('error', 'error') as Parser;
  // Where keys are the client's data, JSON.parse is enough: it makes `__proto__` an own
  // property, and the code that handles metadata never merges it by assignment.
  const secure: Parser = (req, body, done) =>
    poisonChecked(req, body, (err, value) => {
      if (err && req.routeOptions.config?.dataKeys && parses(body))
        return done(null, JSON.parse(body));
      done(err, value);
    });
  const strict: Parser = (req, body, done) =>
    secure(req, body, (err, value) => {
      if (err && (err as { code?: string }).code === 'FST_ERR_CTP_INVALID_JSON_BODY')
        return done(jsonProblem(body));
      done(err, value);
    });
  const lenient: Parser = (req, body, done) => {
    // `curl -X PUT` with no -d still labels nothing: no body, not a bad one.
    if (body.trim() === '') return done(null, undefined);
    secure(req, body, (err, value) => {
      if (!err) return done(null, value);
      done(parses(body) ? jsonProblem(body) : notJson(req.headers['content-type']));
    });
  };
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, strict);
  app.addContentTypeParser(JSON_SUFFIX, { parseAs: 'string' }, strict);
  app.addContentTypeParser(FORM, { parseAs: 'string' }, lenient);
  // Fastify sends a body without Content-Type, and any type without a parser, here.
  app.addContentTypeParser('*', { parseAs: 'string' }, (req, body, done) => {
    const type = req.headers['content-type'];
    if (type === undefined) lenient(req, body as string, done);
    else done(notJson(type));
  });
}
