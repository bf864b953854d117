import { ID_TITLE } from '../lib/title';

/** The service's own sorts; the dataset's fields follow them in the sort menu. */
const SERVICE_SORTS = ['service_updated_at', 'service_created_at'];

/** Whether `sort` is one of the service's own orders rather than a field of the items. */
export const isServiceSort = (sort: string) => SERVICE_SORTS.includes(sort);

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
