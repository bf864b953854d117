import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type ResultEntry, type SearchPage, type VisionApi } from '../api';
import { DetailPanel } from '../components/detail-panel';
import { ErrorBanner } from '../components/error-banner';
import { FacetSidebar } from '../components/facets';
import { LensPicker, useDrop } from '../components/lens';
import { QBar, type QProblem } from '../components/q-bar';
import { ResultGrid, type TileFigure } from '../components/result-grid';
import { isServiceSort, TitleControl } from '../components/view-controls';
import { discover, type Discovery } from '../lib/discover';
import { selection, withoutFields, withRange, withValues } from '../lib/filter-text';
import { photoDataUri } from '../lib/image';
import { formatNumber } from '../lib/q';
import { defaultTitle, rememberedTitle, rememberTitle, titleOf } from '../lib/title';

const MAX_WINDOW = 10_000; // page × limit (contract §6)
const LENS_LIMIT = 24;

interface Lens {
  preview?: string;
  results?: ResultEntry[];
  error?: unknown;
}

/**
 * A dataset's catalogue through the Vision API (its browse token): the `q` bar, the facet
 * sidebar, sort and paging over an image grid, the detail panel with similar items and explore,
 * and lens (search by a dropped or chosen photo). Tiles are titled by a field the user may
 * choose (a name-like one by default). The sidebar reads and edits the filter text.
 */
export function Catalogue({ vision, onBack }: { vision: VisionApi; onBack?: () => void }) {
  const [discovery, setDiscovery] = useState<Discovery>();
  const [notReady, setNotReady] = useState<string>();
  // The text in the bar, and the filter applied (the same once applied).
  const [typed, setTyped] = useState('');
  const [q, setQ] = useState('');
  const [sort, setSort] = useState('service_updated_at');
  const [order, setOrder] = useState<'asc' | 'desc'>('desc');
  const [page, setPage] = useState(1);
  const [limit, setLimit] = useState(24);
  const [titleChoice, setTitleChoice] = useState(() => rememberedTitle(vision.org, vision.dataset));
  const [data, setData] = useState<SearchPage>();
  // The sort the shown results came in (the menu moves before they arrive).
  const [dataSort, setDataSort] = useState(sort);
  const [loading, setLoading] = useState(false);
  const [qProblem, setQProblem] = useState<{ problem: QProblem; sent: string }>();
  const [error, setError] = useState<unknown>();
  const [detail, setDetail] = useState<ResultEntry>();
  const [lens, setLens] = useState<Lens>();
  const opener = useRef<HTMLElement | null>(null);
  const seq = useRef(0);

  // What to offer in the sidebar; a dataset below 200 processed items is asked again later.
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const later = (f: () => Promise<void>) => {
      timer = setTimeout(() => void f(), 5000);
    };
    const run = async () => {
      try {
        const d = await discover(vision);
        if (!live) return;
        setNotReady(undefined);
        setDiscovery(d);
      } catch (e) {
        if (!live) return;
        if (e instanceof ApiError && e.code === 'dataset_not_ready') {
          setNotReady(e.message);
          later(run);
        } else setError(e);
      }
    };
    void run();
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
    };
  }, [vision]);

  const facetFields = discovery?.facetFields ?? [];
  const numericFields = Object.keys(discovery?.numeric ?? {});
  const stringFields = discovery?.stringFields ?? [];
  const title = titleChoice ?? defaultTitle(stringFields);
  const shown = selection(q);

  useEffect(() => {
    if (!discovery) return;
    const n = ++seq.current;
    setLoading(true);
    vision
      .search({
        page,
        limit,
        sort,
        order,
        q,
        fields: '*',
        facets: facetFields.join(','),
        disjunctive: facetFields.join(','),
        facet_size: 12,
        stats: numericFields.join(','),
        histogram: numericFields.map((f) => `${f}:${discovery.numeric[f]}`).join(','),
      })
      .then((r) => {
        if (n !== seq.current) return;
        setData(r);
        setDataSort(sort);
        setQProblem(undefined);
        setError(undefined);
      })
      .catch((e: unknown) => {
        if (n !== seq.current) return;
        const qDetails = e instanceof ApiError ? e.details.filter((d) => d.param === 'q') : [];
        if (e instanceof ApiError && e.status === 400 && qDetails.length)
          setQProblem({ problem: { message: e.message, details: qDetails }, sent: q });
        else setError(e);
      })
      .finally(() => n === seq.current && setLoading(false));
    // facetFields/numericFields derive from discovery.
  }, [vision, discovery, q, sort, order, page, limit]);

  const open = (r: ResultEntry, el?: HTMLElement) => {
    if (!detail) opener.current = el ?? (document.activeElement as HTMLElement | null);
    setDetail(r);
  };
  const close = () => {
    setDetail(undefined);
    opener.current?.focus();
  };

  const runLens = async (file: File) => {
    setLens({});
    try {
      const preview = await photoDataUri(file);
      setLens({ preview });
      const r = await vision.lens(preview, { limit: LENS_LIMIT, fields: '*', q: q || undefined });
      setLens({ preview, results: r.results });
    } catch (e) {
      setLens((l) => ({ ...l, error: e }));
    }
  };
  const dragging = useDrop((f) => void runLens(f));

  // Every filter change is an edit of the text in the bar (what the user sees), then applied.
  const applyQ = (text: string) => {
    setTyped(text);
    setQ(text);
    setPage(1);
  };
  const total = data?.total_results ?? 0;
  const pages = Math.max(1, Math.min(Math.ceil(total / limit), Math.floor(MAX_WINDOW / limit)));
  const itemTitle = (r: ResultEntry) => titleOf(r, title);
  // Under each tile, the value the grid is sorted by, named (not twice when it is the title).
  const sortFigure = (r: ResultEntry): TileFigure | undefined => {
    if (isServiceSort(dataSort) || dataSort === title) return undefined;
    const v = r.metadata[dataSort];
    const value =
      v === undefined || v === null
        ? '—'
        : typeof v === 'number'
          ? formatNumber(v)
          : Array.isArray(v)
            ? v.join(', ')
            : String(v);
    return { label: dataSort, value };
  };

  return (
    <div class="catalogue">
      <div class="view-head">
        <h1>
          <span class="muted">{vision.org} /</span> {vision.dataset}
        </h1>
        <div class="actions">
          {onBack ? (
            <button type="button" class="secondary" onClick={onBack}>
              ← Datasets
            </button>
          ) : null}
          <LensPicker
            busy={!!lens && !lens.results && !lens.error}
            onFile={(f) => void runLens(f)}
          />
        </div>
      </div>

      {notReady ? (
        <p class="notice" role="status">
          Search opens once the dataset has 200 processed items. {notReady} Checking again every few
          seconds…
        </p>
      ) : null}
      <ErrorBanner error={error} />

      <QBar
        value={typed}
        sent={qProblem?.sent ?? q}
        problem={qProblem?.problem}
        onInput={setTyped}
        onSubmit={applyQ}
      />

      <div class="catalogue-body">
        <FacetSidebar
          facetFields={facetFields}
          numericFields={numericFields}
          facets={data?.facets ?? {}}
          stats={data?.stats ?? {}}
          histograms={data?.histograms ?? {}}
          selection={shown}
          onValues={(field, values) => applyQ(withValues(typed, field, values))}
          onRange={(field, r) => applyQ(withRange(typed, field, r))}
          onClear={() => applyQ(withoutFields(typed, [...facetFields, ...numericFields]))}
        />

        {lens ? (
          <section class="results" aria-labelledby="lens-title">
            <div class="results-head">
              <h2 id="lens-title">Search by photo</h2>
              <button type="button" class="secondary" onClick={() => setLens(undefined)}>
                Back to the catalogue
              </button>
            </div>
            <div class="lens-query">
              {lens.preview ? <img src={lens.preview} alt="the photo searched for" /> : null}
              <p class="muted" role="status">
                {lens.results
                  ? `${lens.results.length} most similar items${q ? ' matching the filters' : ''}`
                  : lens.error
                    ? ''
                    : 'Searching…'}
              </p>
            </div>
            <ErrorBanner error={lens.error} />
            {lens.results ? (
              <ResultGrid
                label="Items similar to the photo"
                results={lens.results}
                onOpen={open}
                title={itemTitle}
              />
            ) : null}
          </section>
        ) : (
          <section class="results" aria-labelledby="results-title" aria-busy={loading}>
            <div class="results-head">
              <h2 id="results-title" aria-live="polite">
                {data ? (
                  <>
                    <span class="total" data-total={total}>
                      {total}
                    </span>{' '}
                    {total === 1 ? 'item' : 'items'}
                  </>
                ) : discovery || error ? (
                  'Items'
                ) : (
                  'Loading…'
                )}
              </h2>
              <div class="sort">
                <label for="sort">Sort</label>
                <select
                  id="sort"
                  value={sort}
                  onChange={(e) => {
                    setSort(e.currentTarget.value);
                    setPage(1);
                  }}
                >
                  <option value="service_updated_at">last updated</option>
                  <option value="service_created_at">created</option>
                  {[...numericFields, ...facetFields].map((f) => (
                    <option key={f} value={f}>
                      {f}
                    </option>
                  ))}
                </select>
                <label for="order" class="visually-hidden">
                  Order
                </label>
                <select
                  id="order"
                  value={order}
                  onChange={(e) => {
                    setOrder(e.currentTarget.value as 'asc' | 'desc');
                    setPage(1);
                  }}
                >
                  <option value="desc">descending</option>
                  <option value="asc">ascending</option>
                </select>
                <TitleControl
                  fields={stringFields}
                  title={title}
                  onChange={(field) => {
                    rememberTitle(vision.org, vision.dataset, field);
                    setTitleChoice(field);
                  }}
                />
              </div>
            </div>
            {data && data.results.length === 0 ? (
              <p class="muted">Nothing matches these filters.</p>
            ) : null}
            {data ? (
              <ResultGrid
                label="Catalogue"
                results={data.results}
                onOpen={open}
                title={itemTitle}
                figure={sortFigure}
              />
            ) : null}
            {data && total > 0 ? (
              <nav class="pager" aria-label="Pages">
                <button
                  type="button"
                  class="secondary"
                  disabled={page <= 1}
                  onClick={() => setPage(page - 1)}
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
                  onClick={() => setPage(page + 1)}
                >
                  Next →
                </button>
                <label for="limit" class="visually-hidden">
                  Items per page
                </label>
                <select
                  id="limit"
                  value={limit}
                  onChange={(e) => {
                    setLimit(Number(e.currentTarget.value));
                    setPage(1);
                  }}
                >
                  {[12, 24, 48].map((n) => (
                    <option key={n} value={n}>
                      {n} per page
                    </option>
                  ))}
                </select>
              </nav>
            ) : null}
          </section>
        )}
      </div>

      {detail ? (
        <DetailPanel
          vision={vision}
          item={detail}
          title={itemTitle}
          onOpen={(r) => open(r)}
          onClose={close}
        />
      ) : null}
      {dragging ? (
        <div class="drop-overlay" aria-hidden="true">
          <p>Drop a photo to find similar items</p>
        </div>
      ) : null}
    </div>
  );
}
