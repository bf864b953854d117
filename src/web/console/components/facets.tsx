import { useState } from 'preact/hooks';
import {
  numericBuckets,
  type FacetFigure,
  type HistogramBucket,
  type NumericBucket,
  type StatsFigure,
} from '../api';
import type { Selection } from '../lib/filter-text';
import { formatNumber, type Range } from '../lib/q';
import { useOnChange } from '../lib/hooks';

/**
 * The facet sidebar (contract §10). Value lists are multi-select: a field's counts are
 * disjunctive (they ignore the field's own selection), so the alternatives keep their numbers.
 * Numeric fields show a histogram (a bar click selects its bucket) and a min/max range. What is
 * ticked is read from the filter text (`selection`), and every change is an edit of that text;
 * a field the text filters in a way the boxes cannot show is left to the text.
 */
export function FacetSidebar({
  facetFields,
  numericFields,
  facets,
  stats,
  histograms,
  selection,
  onValues,
  onRange,
  onClear,
}: {
  facetFields: string[];
  numericFields: string[];
  facets: Record<string, FacetFigure>;
  stats: Record<string, StatsFigure>;
  histograms: Record<string, HistogramBucket[]>;
  selection: Selection;
  onValues: (field: string, values: string[]) => void;
  onRange: (field: string, r: Range) => void;
  onClear: () => void;
}) {
  const [open, setOpen] = useState(false);
  const active =
    facetFields.some((f) => selection.values[f]?.length) ||
    numericFields.some((f) => selection.ranges[f]);

  const toggle = (field: string, value: string, on: boolean) => {
    const now = selection.values[field] ?? [];
    onValues(field, on ? [...now, value] : now.filter((v) => v !== value));
  };

  return (
    <nav class={open ? 'sidebar open' : 'sidebar'} aria-label="Filters">
      <button
        type="button"
        class="sidebar-toggle secondary"
        aria-expanded={open}
        aria-controls="sidebar-body"
        onClick={() => setOpen(!open)}
      >
        Filters{active ? ' (active)' : ''}
      </button>
      <div id="sidebar-body" class="sidebar-body">
        {active ? (
          <button type="button" class="link" onClick={onClear}>
            Clear all filters
          </button>
        ) : null}
        {facetFields.length + numericFields.length === 0 ? (
          <p class="muted">No fields to filter on.</p>
        ) : null}
        {facetFields.map((field) => (
          <FacetList
            key={field}
            field={field}
            figure={facets[field]}
            selected={selection.values[field] ?? []}
            textOnly={selection.textOnly.has(field)}
            onToggle={(v, on) => toggle(field, v, on)}
          />
        ))}
        {numericFields.map((field) => (
          <NumericRange
            key={field}
            field={field}
            stats={stats[field]}
            buckets={numericBuckets(histograms[field])}
            range={selection.ranges[field] ?? {}}
            textOnly={selection.textOnly.has(field)}
            onRange={(r) => onRange(field, r)}
          />
        ))}
      </div>
    </nav>
  );
}

/** Says why a field's controls are off: the filter text holds a condition they cannot show. */
const TextOnly = ({ field }: { field: string }) => (
  <p class="hint facet-text-only">
    Filtered in the text above (<code>{field}</code>); edit it there.
  </p>
);

function FacetList({
  field,
  figure,
  selected,
  textOnly,
  onToggle,
}: {
  field: string;
  figure?: FacetFigure;
  selected: string[];
  textOnly: boolean;
  onToggle: (value: string, on: boolean) => void;
}) {
  const buckets = figure?.buckets ?? [];
  // Selected values stay listed even when nothing matches them any more.
  const rows = [
    ...buckets,
    ...selected
      .filter((v) => !buckets.some((b) => b.value === v))
      .map((value) => ({ value, count: 0 })),
  ];
  return (
    <fieldset class="facet" data-field={field}>
      <legend>{field}</legend>
      {textOnly ? <TextOnly field={field} /> : null}
      {rows.map((b) => {
        const id = `facet-${field}-${b.value}`.replace(/[^\w-]/g, '_');
        return (
          <div class="facet-row" key={b.value}>
            <input
              type="checkbox"
              id={id}
              checked={selected.includes(b.value)}
              disabled={textOnly}
              onChange={(e) => onToggle(b.value, e.currentTarget.checked)}
            />
            <label for={id}>
              <span class="facet-value">{b.value}</span>
              <span class="count" data-count={b.count}>
                {b.count}
              </span>
            </label>
          </div>
        );
      })}
      {figure && (figure.other > 0 || figure.missing > 0) ? (
        <p class="hint">
          {figure.other > 0 ? `${figure.other} in other values` : ''}
          {figure.other > 0 && figure.missing > 0 ? ' · ' : ''}
          {figure.missing > 0 ? `${figure.missing} without ${field}` : ''}
        </p>
      ) : null}
    </fieldset>
  );
}

const parse = (s: string): number | undefined => {
  if (s.trim() === '') return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : undefined;
};

function NumericRange({
  field,
  stats,
  buckets,
  range,
  textOnly,
  onRange,
}: {
  field: string;
  stats?: StatsFigure;
  buckets: NumericBucket[];
  range: Range;
  textOnly: boolean;
  onRange: (r: Range) => void;
}) {
  const [min, setMin] = useState(range.min === undefined ? '' : String(range.min));
  const [max, setMax] = useState(range.max === undefined ? '' : String(range.max));
  useOnChange(`${range.min}:${range.max}`, () => {
    setMin(range.min === undefined ? '' : String(range.min));
    setMax(range.max === undefined ? '' : String(range.max));
  });
  const top = Math.max(1, ...buckets.map((b) => b.count));
  const id = `range-${field}`.replace(/[^\w-]/g, '_');
  return (
    <fieldset class="facet numeric" data-field={field} disabled={textOnly}>
      <legend>{field}</legend>
      {textOnly ? <TextOnly field={field} /> : null}
      {buckets.length ? (
        <div class="histogram" role="group" aria-label={`${field} distribution`}>
          {buckets.map((b) => (
            <button
              type="button"
              key={b.from}
              class="bar"
              title={`${formatNumber(b.from)}–${formatNumber(b.to)}: ${b.count}`}
              aria-label={`${field} from ${formatNumber(b.from)} to ${formatNumber(b.to)}: ${b.count} items`}
              onClick={() => onRange({ min: b.from, max: b.to })}
            >
              <span class="bar-fill" style={{ height: `${(b.count / top) * 100}%` }} />
            </button>
          ))}
        </div>
      ) : null}
      {stats && stats.count > 0 && stats.min !== null && stats.max !== null ? (
        <p class="hint">
          {formatNumber(stats.min)} – {formatNumber(stats.max)}, average{' '}
          {formatNumber(stats.avg ?? 0)} ({stats.count} items)
        </p>
      ) : null}
      <form
        class="range"
        onSubmit={(e) => {
          e.preventDefault();
          onRange({ min: parse(min), max: parse(max) });
        }}
      >
        <label for={`${id}-min`}>min</label>
        <input
          id={`${id}-min`}
          type="number"
          step="any"
          value={min}
          onInput={(e) => setMin(e.currentTarget.value)}
        />
        <label for={`${id}-max`}>max</label>
        <input
          id={`${id}-max`}
          type="number"
          step="any"
          value={max}
          onInput={(e) => setMax(e.currentTarget.value)}
        />
        <button type="submit" class="secondary">
          Set
        </button>
        {range.min !== undefined || range.max !== undefined ? (
          <button type="button" class="link" onClick={() => onRange({})}>
            any
          </button>
        ) : null}
      </form>
    </fieldset>
  );
}
