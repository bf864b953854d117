import { useEffect, useRef, useState } from 'preact/hooks';
import type { ResultEntry, VisionApi } from '../api';
import { useEscape } from '../lib/hooks';
import { allowAll, type Allowed } from '../lib/scoped';
import { counted, groupOf } from '../lib/variants';
import { ErrorBanner } from './error-banner';
import { ItemImage } from './item-image';
import { ResultGrid } from './result-grid';
import { VARIED, VaryControl } from './view-controls';

const SIMILAR = 12;

interface Journey {
  /** The items selected so far, in order. */
  steps: ResultEntry[];
  results: ResultEntry[];
}

/**
 * One item: its picture and metadata, the items most similar to it (GET …/similar?id=), and an
 * explore journey that starts from it and goes on through each result's `explore_url` (which
 * carries the selections so far). Escape or the close button closes it.
 *
 * On a grouped catalogue (`group`, contract §13) similar and explore are asked with the group
 * field: the similar items are one per other product (the service leaves the item's own product
 * out and gives the item itself first with its group), and the item's own variants are a link.
 *
 * "Vary the results" (`vary`, a choice of the view kept in the address) asks for the similar items
 * with `diversity` (contract §15): fewer near-copies of one picture. Switching it asks again.
 *
 * A token that may not ask for similar items or explore (a scoped token's `types`, §16) is not
 * offered them: the panel shows the item alone.
 */
export function DetailPanel({
  vision,
  item,
  title,
  group,
  vary,
  onVary,
  allowed = allowAll,
  onOpen,
  onVariants,
  onClose,
}: {
  vision: VisionApi;
  item: ResultEntry;
  /** An item's title (the catalogue's title field). */
  title: (r: ResultEntry) => string;
  /** The field the catalogue groups by, when it shows one tile per product. */
  group?: string;
  /** Similar items asked with diversity. */
  vary: boolean;
  onVary: (on: boolean) => void;
  /** The request types the token may make. */
  allowed?: Allowed;
  onOpen: (r: ResultEntry) => void;
  /** Shows a product's variants (the value of its group field). */
  onVariants?: (value: string | number | boolean) => void;
  onClose: () => void;
}) {
  const [shown, setShown] = useState<ResultEntry>(item);
  const [similar, setSimilar] = useState<ResultEntry[] | undefined>();
  const [journey, setJourney] = useState<Journey | undefined>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const heading = useRef<HTMLHeadingElement>(null);
  const canSimilar = allowed('similar');
  const canExplore = allowed('explore');
  useEscape(true, onClose);

  useEffect(() => {
    setShown(item);
    setJourney(undefined);
    heading.current?.focus();
  }, [item]);

  useEffect(() => {
    let live = true;
    setSimilar(undefined);
    setError(undefined);
    if (!canSimilar) return;
    vision
      .similar(item.id, {
        limit: SIMILAR + 1,
        fields: '*',
        group,
        diversity: vary ? VARIED : undefined,
      })
      .then((r) => {
        if (!live) return;
        // The item itself comes first (contract §7), with its metadata (and, grouped, its own
        // product's group, §13: the grid's tile may have stood for a product under a filter).
        const [self, ...rest] = r.results;
        if (self?.id === item.id)
          setShown({ ...item, ...self, group: self.group ?? item.group, score: undefined });
        setSimilar(rest.filter((x) => x.id !== item.id).slice(0, SIMILAR));
      })
      .catch((e: unknown) => live && setError(e));
    return () => {
      live = false;
    };
  }, [vision, item, group, vary, canSimilar]);

  const explore = async (from: ResultEntry, steps: ResultEntry[]) => {
    setBusy(true);
    setError(undefined);
    try {
      const r = await vision.explore(from.explore_url, { limit: SIMILAR, fields: '*', group });
      setJourney({ steps, results: r.results });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const exploreButton = (
    <button
      type="button"
      disabled={busy}
      onClick={() => void explore(shown, [shown])}
      title="Start a visual-discovery journey from this item"
    >
      Explore from here
    </button>
  );

  const meta = Object.entries(shown.metadata).filter(([k]) => k !== 'image_url');
  const name = title(shown);
  // The item's product, once the grouped similar request has said how many variants it has.
  const product = group && similar ? groupOf(shown) : undefined;
  const others = product ? product.count - 1 : 0;
  return (
    <div class="detail" role="dialog" aria-modal="false" aria-labelledby="detail-title">
      <div class="detail-head">
        <h2 id="detail-title" tabIndex={-1} ref={heading}>
          {name}
        </h2>
        <button type="button" class="secondary" onClick={onClose} aria-label="Close details">
          Close
        </button>
      </div>
      {name !== shown.id ? (
        <p class="detail-id muted">
          id <span class="mono">{shown.id}</span>
        </p>
      ) : null}
      <div class="detail-image">
        <ItemImage metadata={shown.metadata} alt={`image of ${name}`} />
      </div>
      {typeof shown.metadata.image_url === 'string' ? (
        <p class="hint break">
          Image:{' '}
          <a href={shown.metadata.image_url} target="_blank" rel="noopener noreferrer">
            {shown.metadata.image_url}
          </a>
        </p>
      ) : null}
      {product && others > 0 ? (
        <p class="detail-variants">
          Other variants of this product:{' '}
          {onVariants ? (
            <button
              type="button"
              class="link"
              data-count={others}
              aria-label={`${counted(others, 'other variant', 'other variants')} of this product: show them`}
              onClick={() => onVariants(product.value)}
            >
              {others}
            </button>
          ) : (
            <span data-count={others}>{others}</span>
          )}
        </p>
      ) : null}
      {meta.length ? (
        <table class="meta">
          <tbody>
            {meta.map(([k, v]) => (
              <tr key={k}>
                <th scope="row">{k}</th>
                <td>{Array.isArray(v) ? v.join(', ') : String(v)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <ErrorBanner error={error} />

      {canSimilar ? (
        <section aria-labelledby="similar-title">
          <div class="section-head">
            <h3 id="similar-title">{group ? 'Similar products' : 'Similar items'}</h3>
            <div class="section-actions">
              <VaryControl vary={vary} onChange={onVary} />
              {canExplore ? exploreButton : null}
            </div>
          </div>
          {similar === undefined && !error ? <p class="muted">Looking for similar items…</p> : null}
          {similar ? (
            similar.length ? (
              <ResultGrid
                small
                label={`Items similar to ${name}`}
                results={similar}
                title={title}
                onOpen={(r) => onOpen(r)}
                onGroup={onVariants}
              />
            ) : (
              <p class="muted">No similar items.</p>
            )
          ) : null}
        </section>
      ) : canExplore ? (
        <div class="section-actions">{exploreButton}</div>
      ) : null}

      {journey ? (
        <section aria-labelledby="journey-title" class="journey">
          <h3 id="journey-title">Explore journey</h3>
          <ol class="journey-steps" aria-label="Selections so far">
            {journey.steps.map((s) => (
              <li key={s.id}>
                <button type="button" class="link" onClick={() => onOpen(s)}>
                  {title(s)}
                </button>
              </li>
            ))}
          </ol>
          <p class="hint">Pick the item you like best to take the next step.</p>
          <ResultGrid
            small
            label="Next step of the journey"
            results={journey.results}
            title={title}
            onOpen={(r) => void explore(r, [...journey.steps, r])}
            onGroup={onVariants}
          />
        </section>
      ) : null}
    </div>
  );
}
