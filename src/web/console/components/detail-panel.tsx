import { useEffect, useRef, useState } from 'preact/hooks';
import type { ResultEntry, VisionApi } from '../api';
import { useEscape } from '../lib/hooks';
import { ErrorBanner } from './error-banner';
import { ItemImage } from './item-image';
import { ResultGrid } from './result-grid';

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
 */
export function DetailPanel({
  vision,
  item,
  title,
  onOpen,
  onClose,
}: {
  vision: VisionApi;
  item: ResultEntry;
  /** An item's title (the catalogue's title field). */
  title: (r: ResultEntry) => string;
  onOpen: (r: ResultEntry) => void;
  onClose: () => void;
}) {
  const [shown, setShown] = useState<ResultEntry>(item);
  const [similar, setSimilar] = useState<ResultEntry[] | undefined>();
  const [journey, setJourney] = useState<Journey | undefined>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const heading = useRef<HTMLHeadingElement>(null);
  useEscape(true, onClose);

  useEffect(() => {
    let live = true;
    setShown(item);
    setSimilar(undefined);
    setJourney(undefined);
    setError(undefined);
    heading.current?.focus();
    vision
      .similar(item.id, { limit: SIMILAR + 1, fields: '*' })
      .then((r) => {
        if (!live) return;
        // The item itself comes first (contract §7), with its metadata.
        const [self, ...rest] = r.results;
        if (self?.id === item.id) setShown({ ...item, ...self, score: undefined });
        setSimilar(rest.filter((x) => x.id !== item.id).slice(0, SIMILAR));
      })
      .catch((e: unknown) => live && setError(e));
    return () => {
      live = false;
    };
  }, [vision, item]);

  const explore = async (from: ResultEntry, steps: ResultEntry[]) => {
    setBusy(true);
    setError(undefined);
    try {
      const r = await vision.explore(from.explore_url, { limit: SIMILAR, fields: '*' });
      setJourney({ steps, results: r.results });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const meta = Object.entries(shown.metadata).filter(([k]) => k !== 'image_url');
  const name = title(shown);
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

      <section aria-labelledby="similar-title">
        <div class="section-head">
          <h3 id="similar-title">Similar items</h3>
          <button
            type="button"
            disabled={busy}
            onClick={() => void explore(shown, [shown])}
            title="Start a visual-discovery journey from this item"
          >
            Explore from here
          </button>
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
            />
          ) : (
            <p class="muted">No similar items.</p>
          )
        ) : null}
      </section>

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
          />
        </section>
      ) : null}
    </div>
  );
}
