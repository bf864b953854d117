import type { Order } from '../lib/url-state';
import { ID_TITLE } from '../lib/title';

interface SortOption {
  value: string;
  label: string;
}

/** The service's own sorts, then the dataset's fields; more sorts are more entries here. */
const SERVICE_SORTS: SortOption[] = [
  { value: 'service_updated_at', label: 'last updated' },
  { value: 'service_created_at', label: 'created' },
];

/** Whether `sort` is one of the service's own orders rather than a field of the items. */
export const isServiceSort = (sort: string) => SERVICE_SORTS.some((s) => s.value === sort);

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
  return (
    <>
      <label for="sort">Sort</label>
      <select id="sort" value={sort} onChange={(e) => onChange(e.currentTarget.value, order)}>
        {sortOptions(fields, sort).map((o) => (
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
