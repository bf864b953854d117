import type { Order } from '../lib/url-state';
import { ID_TITLE } from '../lib/title';

interface SortOption {
  value: string;
  label: string;
  /** The order the option means; choosing it sets the order (the user may still flip it). */
  order?: Order;
  /** The name of the sort value under each tile; none: the tile shows no sort value. */
  figure?: string;
}

/** The service's own sorts, then the dataset's fields; more sorts are more entries here. */
const SERVICE_SORTS: SortOption[] = [
  { value: 'service_updated_at', label: 'last updated' },
  { value: 'service_created_at', label: 'created' },
  // Contract §14: clicks and purchased quantity of the trailing 30 days, from track events.
  { value: 'service_popularity', label: 'most popular', order: 'desc', figure: 'clicks, 30 days' },
  { value: 'service_purchases', label: 'best-selling', order: 'desc', figure: 'sold, 30 days' },
];

/**
 * How a tile names the value the grid is sorted by: a service sort's own wording (undefined for
 * the time sorts, which a tile does not show), a field by its name.
 */
export const sortFigureLabel = (sort: string): string | undefined => {
  const service = SERVICE_SORTS.find((s) => s.value === sort);
  return service ? service.figure : sort;
};

function sortOptions(fields: string[], current: string): SortOption[] {
  const options = [...SERVICE_SORTS, ...fields.map((f) => ({ value: f, label: f }))];
  // A sort from a link that the dataset no longer offers still shows as chosen.
  if (!options.some((o) => o.value === current)) options.push({ value: current, label: current });
  return options;
}

/** Sort field and order of the grid. */
export function SortControls({
  fields,
  sort,
  order,
  onChange,
}: {
  fields: string[];
  sort: string;
  order: Order;
  onChange: (sort: string, order: Order) => void;
}) {
  const options = sortOptions(fields, sort);
  const choose = (value: string) =>
    onChange(value, options.find((o) => o.value === value)?.order ?? order);
  return (
    <>
      <label for="sort">Sort</label>
      <select id="sort" value={sort} onChange={(e) => choose(e.currentTarget.value)}>
        {options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
      <label for="order" class="visually-hidden">
        Order
      </label>
      <select
        id="order"
        value={order}
        onChange={(e) => onChange(sort, e.currentTarget.value as Order)}
      >
        <option value="desc">descending</option>
        <option value="asc">ascending</option>
      </select>
    </>
  );
}

/** Which field titles the tiles: the dataset's text fields, or the id. */
export function TitleControl({
  fields,
  title,
  onChange,
}: {
  fields: string[];
  title: string;
  onChange: (field: string) => void;
}) {
  const options = fields.includes(title) || title === ID_TITLE ? fields : [...fields, title];
  return (
    <>
      <label for="title-field">Title</label>
      <select id="title-field" value={title} onChange={(e) => onChange(e.currentTarget.value)}>
        {options.map((f) => (
          <option key={f} value={f}>
            {f}
          </option>
        ))}
        <option value={ID_TITLE}>id</option>
      </select>
    </>
  );
}

/** The `diversity` (contract §15) similar items are asked with while the results are varied. */
export const VARIED = 0.5;

/**
 * "Vary the results": similar items asked with diversity, so a row of near-copies of one picture
 * gives way to other pictures that are still close to the query (their score is unchanged).
 */
export function VaryControl({
  vary,
  onChange,
}: {
  vary: boolean;
  onChange: (on: boolean) => void;
}) {
  return (
    <label
      class="variants-switch"
      title="Fewer near-copies: each result is picked for its similarity less its likeness to those before it"
    >
      <input
        type="checkbox"
        role="switch"
        checked={vary}
        onChange={(e) => onChange(e.currentTarget.checked)}
      />
      Vary the results
    </label>
  );
}
