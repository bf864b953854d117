import type { ResultEntry } from '../api';
import { ItemImage } from './item-image';

/** Result entries as a grid of image buttons (a click or Enter opens the item). */
export function ResultGrid({
  results,
  onOpen,
  label,
  small = false,
  caption,
}: {
  results: ResultEntry[];
  onOpen: (r: ResultEntry, el: HTMLElement) => void;
  label: string;
  small?: boolean;
  /** A short line under each id (e.g. price); similarity results show their score. */
  caption?: (r: ResultEntry) => string | undefined;
}) {
  return (
    <ul class={small ? 'grid grid-small' : 'grid'} aria-label={label}>
      {results.map((r) => {
        const line =
          r.score !== undefined ? `score ${r.score.toFixed(3)}` : (caption?.(r) ?? undefined);
        return (
          <li key={r.id}>
            <button
              type="button"
              class="tile"
              data-id={r.id}
              onClick={(e) => onOpen(r, e.currentTarget)}
            >
              <ItemImage metadata={r.metadata} />
              <span class="tile-id">{r.id}</span>
              {line ? <span class="tile-line">{line}</span> : null}
            </button>
          </li>
        );
      })}
    </ul>
  );
}
