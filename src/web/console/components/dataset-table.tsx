import type { Dataset } from '../api';

/** The organisation's datasets with their ingestion progress (contract §3 `counts`). */
export function DatasetTable({
  datasets,
  selected,
  onSelect,
  onBrowse,
}: {
  datasets: Dataset[];
  selected?: string;
  onSelect: (name: string) => void;
  onBrowse: (d: Dataset) => void;
}) {
  if (!datasets.length) return <p class="muted">No datasets yet: create one below.</p>;
  return (
    <div class="table-wrap">
      <table class="datasets">
        <thead>
          <tr>
            <th scope="col">Dataset</th>
            <th scope="col">Status</th>
            <th scope="col">Progress</th>
            <th scope="col" class="num">
              Items
            </th>
            <th scope="col" class="num">
              Processed
            </th>
            <th scope="col" class="num">
              Pending
            </th>
            <th scope="col" class="num">
              Errors
            </th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {datasets.map((d) => {
            const c = d.counts;
            return (
              <tr
                key={d.name}
                data-dataset={d.name}
                class={d.name === selected ? 'selected' : undefined}
              >
                <th scope="row">
                  <button
                    type="button"
                    class="link"
                    aria-pressed={d.name === selected}
                    onClick={() => onSelect(d.name)}
                  >
                    {d.name}
                  </button>
                </th>
                <td>
                  <span class={`badge ${d.status}`}>{d.status}</span>
                </td>
                <td>
                  <progress
                    max={Math.max(1, c.items)}
                    value={c.processed + c.errors}
                    aria-label={`${d.name}: ${c.processed} of ${c.items} processed`}
                  />
                </td>
                <td class="num" data-count="items">
                  {c.items}
                </td>
                <td class="num" data-count="processed">
                  {c.processed}
                </td>
                <td class="num" data-count="pending">
                  {c.pending}
                </td>
                <td class="num" data-count="errors">
                  {c.errors}
                </td>
                <td>
                  <button type="button" class="secondary small" onClick={() => onBrowse(d)}>
                    Browse
                  </button>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
