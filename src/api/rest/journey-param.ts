import { invalid } from '../../domain/errors';

/** `path` as explore_url carries it: percent-encoded ids, comma-separated; empty is none. */
export function journeyParam(path: string | undefined): string[] {
  if (path === undefined || path === '') return [];
  return path.split(',').map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      throw invalid('path is not a list of percent-encoded ids', [
        { param: 'path', message: `'${s}' is not percent-encoded` },
      ]);
    }
  });
}
