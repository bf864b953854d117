import { filterTerms, parseReportParams } from '../../src/domain/report';
import { AppError } from '../../src/domain/errors';

const NOW = Date.parse('2026-11-23T15:30:00Z');
const param = (p: Record<string, string>) => {
  try {
    parseReportParams(p, NOW);
    return 'ok';
  } catch (e) {
    return (e as AppError).details?.[0]?.param;
  }
};

test('report times: ISO 8601, four-digit years, epoch ms; anything a Date cannot hold is a 400', () => {
  expect(parseReportParams({ from: '2026', to: '2027' }, NOW)).toMatchObject({
    from: Date.parse('2026-01-01T00:00:00Z'),
    to: Date.parse('2027-01-01T00:00:00Z'),
  });
  expect(parseReportParams({ from: '1767607200000', interval: 'week' }, NOW).from).toBe(
    Date.parse('2026-01-05T00:00:00Z'),
  );
  expect(param({ from: '9999999999999999', interval: 'month' })).toBe('from');
  expect(param({ to: '99999999999999999' })).toBe('to');
  expect(param({ from: 'yesterday' })).toBe('from');
  expect(param({ from: '2026-11-23', to: '2026-11-22' })).toBe('from');
});

test('filter terms are cut to 256 characters so one long value cannot fail a log write', () => {
  const long = 'x'.repeat(40_000);
  const [key, term] = filterTerms([{ kind: 'match', field: 'color', values: [long] }]);
  expect(key).toBe('color');
  expect(term).toHaveLength(257);
  expect(term!.startsWith('color:xxx')).toBe(true);
});
