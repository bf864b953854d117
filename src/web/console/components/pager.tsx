import { PAGE_SIZES } from '../lib/url-state';

/** Previous and next page, where we are, and how many items a page holds. */
export function Pager({
  page,
  pages,
  limit,
  onPage,
  onLimit,
}: {
  page: number;
  pages: number;
  limit: number;
  onPage: (page: number) => void;
  onLimit: (limit: number) => void;
}) {
  return (
    <nav class="pager" aria-label="Pages">
      <button
        type="button"
        class="secondary"
        disabled={page <= 1}
        onClick={() => onPage(Math.min(page - 1, pages))}
      >
        ← Previous
      </button>
      <span>
        Page {page} of {pages}
      </span>
      <button
        type="button"
        class="secondary"
        disabled={page >= pages}
        onClick={() => onPage(page + 1)}
      >
        Next →
      </button>
      <label for="limit" class="visually-hidden">
        Items per page
      </label>
      <select id="limit" value={limit} onChange={(e) => onLimit(Number(e.currentTarget.value))}>
        {PAGE_SIZES.map((n) => (
          <option key={n} value={n}>
            {n} per page
          </option>
        ))}
      </select>
    </nav>
  );
}
