import type { ResultEntry } from '../api';
import { counted, groupOf } from '../lib/variants';
import { ItemImage } from './item-image';

/** A labelled figure under a tile, e.g. the value the grid is sorted by. */
export interface TileFigure {
  label: string;
  value: string;
}

/**
 * Result entries as a grid of image buttons (a click or Enter opens the item): each titled by
 * `title` (the id when none), the id in small type under a distinct title, and one labelled
 * figure: the similarity score of a similarity result, else what `figure` gives. A grouped
 * result (contract §13) carries its product's variant count over the picture, a button when
 * `onGroup` opens that product's variants (a tile of an item without a product has no count).
 */
export function ResultGrid({
  results,
  onOpen,
  label,
  small = false,
  title = (r) => r.id,
  figure,
  onGroup,
}: {
  results: ResultEntry[];
  onOpen: (r: ResultEntry, el: HTMLElement) => void;
  label: string;
  small?: boolean;
  title?: (r: ResultEntry) => string;
  figure?: (r: ResultEntry) => TileFigure | undefined;
  onGroup?: (value: string | number | boolean) => void;
}) {
  return (
    <ul class={small ? 'grid grid-small' : 'grid'} aria-label={label}>
      {results.map((r) => {
        const name = title(r);
        const line: TileFigure | undefined =
          r.score !== undefined ? { label: 'similarity', value: r.score.toFixed(3) } : figure?.(r);
        const group = groupOf(r);
        const variants = group ? counted(group.count, 'variant', 'variants') : undefined;
        return (
          <li key={r.id} class="grid-cell">
            <button
              type="button"
              class="tile"
              data-id={r.id}
              onClick={(e) => onOpen(r, e.currentTarget)}
            >
              <ItemImage metadata={r.metadata} />
              <span class="tile-title">{name}</span>
              {name !== r.id ? <span class="tile-id mono">{r.id}</span> : null}
              {line ? (
                <span class="tile-line" data-label={line.label}>
                  <span class="tile-label">{line.label}:</span> {line.value}
                </span>
              ) : null}
            </button>
            {group && onGroup ? (
              <button
                type="button"
                class="tile-variants"
                data-count={group.count}
                aria-label={`${variants} of ${name}: show them`}
                onClick={() => onGroup(group.value)}
              >
                {variants}
              </button>
            ) : group ? (
              <span class="tile-variants" data-count={group.count}>
                {variants}
              </span>
            ) : null}
          </li>
        );
      })}
    </ul>
  );
}
