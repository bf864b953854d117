import {
  CALENDAR_INTERVALS,
  badFigure as bad,
  checkFigures,
  type FiguresSpec,
  type CalendarInterval,
  type HistogramSpec,
} from '../../domain/figures';
import { LIMITS, isServiceTimeField } from '../../domain/limits';

// The §10 figures as REST query parameters carry them: comma lists and field:interval pairs.

function names(param: string, raw: string | undefined): string[] {
  if (raw === undefined || raw === '') return [];
  const list = raw.split(',').map((s) => s.trim());
  if (list.some((s) => s === '')) throw bad(param, 'an empty field name in the list');
  return [...new Set(list)];
}

/** Parses the §10 query parameters; every problem is a 400 naming its parameter. */
export function parseFiguresParams(p: {
  facets?: string;
  facet_size?: string | number;
  disjunctive?: string;
  stats?: string;
  histogram?: string;
}): FiguresSpec {
  const facetNames = names('facets', p.facets);
  const disjunctive = names('disjunctive', p.disjunctive);
  const stray = disjunctive.filter((f) => !facetNames.includes(f));
  if (stray.length)
    throw bad('disjunctive', `${stray.map((f) => `'${f}'`).join(', ')} not named in facets`);
  let facetSize = LIMITS.facetSizeDefault;
  if (p.facet_size !== undefined && p.facet_size !== '') {
    facetSize = Number(p.facet_size);
    if (!Number.isInteger(facetSize) || facetSize < 1 || facetSize > LIMITS.facetSizeMax)
      throw bad('facet_size', `must be an integer from 1 to ${LIMITS.facetSizeMax}`);
  }
  const stats = names('stats', p.stats);
  const histograms = names('histogram', p.histogram).map((entry): HistogramSpec => {
    const at = entry.lastIndexOf(':');
    if (at <= 0)
      throw bad(
        'histogram',
        `'${entry}' must be field:interval (e.g. price:50 or service_created_at:day)`,
      );
    const field = entry.slice(0, at);
    const interval = entry.slice(at + 1);
    if (isServiceTimeField(field)) {
      if (!(CALENDAR_INTERVALS as readonly string[]).includes(interval))
        throw bad(
          'histogram',
          `'${field}' takes ${CALENDAR_INTERVALS.join('|')}, not '${interval}'`,
        );
      return { field, calendar: interval as CalendarInterval };
    }
    const n = Number(interval);
    if (interval.trim() === '' || !Number.isFinite(n) || n <= 0)
      throw bad('histogram', `the interval of '${field}' must be a number > 0, not '${interval}'`);
    return { field, interval: n };
  });
  return checkFigures({
    facets: facetNames.map((field) => ({ field, disjunctive: disjunctive.includes(field) })),
    facetSize,
    stats,
    histograms,
  });
}
