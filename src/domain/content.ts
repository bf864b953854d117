import { invalid, type ErrorDetail } from './errors';
import { LIMITS } from './limits';
import { metadataProblems, type Metadata, type MetadataPatch } from './metadata';

/** A validated write of one item. POST replaces metadata when present; PUT merges it. */
export interface ContentWrite {
  id: string;
  url?: string;
  metadata?: Metadata | MetadataPatch;
  privateMetadata?: Metadata | MetadataPatch;
}

export type WriteMode = 'post' | 'put';

const ALLOWED_EXTENSIONS = new Set(['jpeg', 'jpg', 'png']);

/** Returns why a URL cannot be an image source, or undefined when it is acceptable. */
export function imageUrlProblem(url: unknown): string | undefined {
  if (typeof url !== 'string' || url.length === 0) return 'url must be a non-empty string';
  if (url.length > LIMITS.urlMaxLength) return `url longer than ${LIMITS.urlMaxLength} characters`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'url is not a valid absolute URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    return `url scheme '${parsed.protocol.replace(/:$/, '')}' is not supported (http, https)`;
  if (parsed.username || parsed.password) return 'url must not carry credentials';
  const last = parsed.pathname.split('/').pop() ?? '';
  const ext = /\.([A-Za-z0-9]{1,8})$/.exec(last)?.[1]?.toLowerCase();
  if (ext && !ALLOWED_EXTENSIONS.has(ext))
    return `unsupported image format '${ext}' (jpeg, jpg, png)`;
  return undefined;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function itemIdProblem(id: unknown): string | undefined {
  if (typeof id !== 'string') return 'id is required and must be a string';
  if (id.length === 0) return 'id must not be empty';
  // A lone UTF-16 surrogate is not text: it cannot be stored or compared as the same id
  // everywhere (JSON encoders replace it, engines sort it differently).
  if (LONE_SURROGATE.test(id)) return 'id holds a lone UTF-16 surrogate (not valid Unicode text)';
  if (id.length > LIMITS.itemIdMaxLength)
    return `id is ${id.length} characters; at most ${LIMITS.itemIdMaxLength}`;
  return undefined;
}

/**
 * Validates a POST/PUT content body. Every bad item is reported (index, id, field) and
 * nothing is accepted when one item is bad, so a batch is all-or-nothing.
 */
export function parseContentBatch(body: unknown, mode: WriteMode): ContentWrite[] {
  if (
    typeof body !== 'object' ||
    body === null ||
    !Array.isArray((body as { content?: unknown }).content)
  ) {
    throw invalid('body must be a JSON object with a "content" array', [
      { field: 'content', message: 'expected an array of content items' },
    ]);
  }
  const items = (body as { content: unknown[] }).content;
  const details: ErrorDetail[] = [];
  const writes: ContentWrite[] = [];
  items.forEach((raw, index) => {
    const at = (field: string, message: string): void => {
      const id = typeof raw === 'object' && raw !== null ? (raw as { id?: unknown }).id : undefined;
      details.push({
        index,
        ...(typeof id === 'string' ? { id: id.slice(0, 120) } : {}),
        field,
        message,
      });
    };
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      at('content', 'each content item must be a JSON object');
      return;
    }
    const item = raw as Record<string, unknown>;
    const before = details.length;
    for (const key of Object.keys(item)) {
      if (!['id', 'url', 'metadata', 'privateMetadata'].includes(key))
        at(key, `unknown field '${key}' (id, url, metadata, privateMetadata)`);
    }
    const idProblem = itemIdProblem(item.id);
    if (idProblem) at('id', idProblem);
    if (item.url === undefined) {
      if (mode === 'post') at('url', 'url is required');
    } else {
      const urlProblem = imageUrlProblem(item.url);
      if (urlProblem) at('url', urlProblem);
    }
    for (const f of ['metadata', 'privateMetadata'] as const) {
      if (item[f] === undefined) continue;
      for (const p of metadataProblems(item[f], f, mode === 'put')) at(p.field ?? f, p.message);
    }
    if (details.length > before) return;
    writes.push({
      id: item.id as string,
      ...(item.url !== undefined ? { url: item.url as string } : {}),
      ...(item.metadata !== undefined ? { metadata: item.metadata as Metadata } : {}),
      ...(item.privateMetadata !== undefined
        ? { privateMetadata: item.privateMetadata as Metadata }
        : {}),
    });
  });
  if (details.length > 0) {
    const bad = new Set(details.map((d) => d.index)).size;
    throw invalid(
      `${bad} of ${items.length} content items are invalid; nothing was stored`,
      details,
    );
  }
  return writes;
}

/** Ids to delete, each checked (every bad one named); duplicates count once. */
export function checkDeleteIds(ids: readonly string[]): string[] {
  if (ids.length > LIMITS.deleteMaxIds)
    throw invalid(`at most ${LIMITS.deleteMaxIds} ids per delete; got ${ids.length}`, [
      { field: 'ids', message: `at most ${LIMITS.deleteMaxIds} ids` },
    ]);
  const details: ErrorDetail[] = [];
  ids.forEach((id, index) => {
    const p = itemIdProblem(id);
    if (p) details.push({ index, field: 'ids', message: p });
  });
  if (details.length) throw invalid('some ids are invalid; nothing was deleted', details);
  return [...new Set(ids)];
}
