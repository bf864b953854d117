import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type ResultEntry, type SearchPage, type VisionApi } from '../api';
import { DetailPanel } from '../components/detail-panel';
import { ErrorBanner } from '../components/error-banner';
import { FacetSidebar } from '../components/facets';
import { LensPicker, useDrop } from '../components/lens';
import { Pager } from '../components/pager';
import { QBar, type QProblem } from '../components/q-bar';
import { ResultGrid, type TileFigure } from '../components/result-grid';
import {
  SortControls,
  sortFigureLabel,
  TitleControl,
  VARIED,
  VaryControl,
} from '../components/view-controls';
import { discover, type Discovery } from '../lib/discover';
import { allowAll, type Allowed } from '../lib/scoped';
import { selection, withoutFields, withRange, withValues } from '../lib/filter-text';
import { useOnChange } from '../lib/hooks';
import { photoDataUri } from '../lib/image';
import { formatNumber } from '../lib/q';
import { defaultTitle, rememberTitle, titleOf } from '../lib/title';
import { useAddressView } from '../lib/use-view';
import { counted, GROUP_FIELD, totals } from '../lib/variants';

const MAX_WINDOW = 10_000; // page × limit (contract §6)
const LENS_LIMIT = 24;

interface Lens {
  preview?: string;
  /** One result per product (asked with the catalogue's group field). */
  grouped?: boolean;
  results?: ResultEntry[];
  error?: unknown;
}

/**
 * A dataset's catalogue through the Vision API (its browse token): the `q` bar, the facet
 * sidebar, sort and paging over an image grid, the detail panel with similar items and explore,
 * and lens (search by a dropped or chosen photo). The filter text, sort, page and title field
 * are one view kept in the address (useAddressView); the sidebar reads and edits the filter text.
 * A dataset with a `parent` field shows one tile per product (contract §13) unless the view asks
 * for every variant; its counts, pages and facet numbers are then products, not items.
 * "Vary the results", also in the view, asks for similar items (of an item, of a photo) with
 * diversity (contract §15).
 *
 * `allowed` says which request types the token may make (a scoped token's `types`, contract §16):
 * a control whose request would be refused is not offered.
 */
export function Catalogue({
  vision,
  onBack,
  allowed = allowAll,
}: {
  vision: VisionApi;
  onBack?: () => void;
  allowed?: Allowed;
}) {
  const canSearch = allowed('search');
  const canLens = allowed('lens');
  const [discovery, setDiscovery] = useState<Discovery>();
  const [notReady, setNotReady] = useState<string>();
  const [view, change] = useAddressView(vision.org, vision.dataset);
  const { q, sort, order, page, limit, allVariants, vary } = view;
  // The text in the bar; it becomes the view's filter when applied.
  const [typed, setTyped] = useState(q);
  useOnChange(q, () => setTyped(q));
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
  const lensSeq = useRef(0);

  // What to offer in the sidebar; a dataset below 200 processed items is asked again later.
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const later = (f: () => Promise<void>) => {
      timer = setTimeout(() => void f(), 5000);
    };
    const run = async () => {
      // A token that may not search has no catalogue to list (figures are searches too).
      if (!canSearch) return;
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
  const title = view.title ?? defaultTitle(stringFields);
  // The tile title (`name`) is no filter: variants share it, so its list would be mostly 1s.
  const sideFacets = facetFields.filter((f) => f !== title);
  const shown = selection(q);
  const groupField = discovery?.groupField;
  const group = groupField && !allVariants ? groupField : undefined;

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
        facets: sideFacets.join(','),
        disjunctive: sideFacets.join(','),
        facet_size: 12,
        stats: numericFields.join(','),
        histogram: numericFields.map((f) => `${f}:${discovery.numeric[f]}`).join(','),
        group,
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
    // sideFacets/numericFields derive from discovery and the title field.
  }, [vision, discovery, q, sort, order, page, limit, group, title]);

  const open = (r: ResultEntry, el?: HTMLElement) => {
    if (!detail) opener.current = el ?? (document.activeElement as HTMLElement | null);
    setDetail(r);
  };
  const close = () => {
    setDetail(undefined);
    opener.current?.focus();
  };

  /** The items most similar to a photo (a data URI); only the latest request's answer shows. */
  const askLens = async (preview: string, varied: boolean) => {
    const n = ++lensSeq.current;
    setLens({ preview });
    try {
      const r = await vision.lens(preview, {
        limit: LENS_LIMIT,
        fields: '*',
        q: q || undefined,
        group,
        diversity: varied ? VARIED : undefined,
      });
      if (n === lensSeq.current)
        setLens({ preview, results: r.results, grouped: group !== undefined });
    } catch (e) {
      if (n === lensSeq.current) setLens({ preview, error: e });
    }
  };
  const runLens = async (file: File) => {
    const n = ++lensSeq.current;
    setLens({});
    let preview: string;
    try {
      preview = await photoDataUri(file);
    } catch (e) {
      if (n === lensSeq.current) setLens({ error: e });
      return;
    }
    if (n === lensSeq.current) await askLens(preview, vary);
  };
  // Similar items, of an item or of a photo, asked again with or without diversity.
  const setVary = (on: boolean) => {
    change({ vary: on });
    if (lens?.preview) void askLens(lens.preview, on);
  };
  const dragging = useDrop((f) => {
    if (canLens) void runLens(f);
  });

  // Every filter change is an edit of the text in the bar (what the user sees), then applied.
  const applyQ = (text: string) => change({ q: text, page: 1 });
  const counts = data ? totals(data) : undefined;
  const total = counts?.shown ?? 0;
  const pages = Math.max(1, Math.min(Math.ceil(total / limit), Math.floor(MAX_WINDOW / limit)));
  const itemTitle = (r: ResultEntry) => titleOf(r, title);
  // Under each tile, the value the grid is sorted by, named (not twice when it is the title).
  const sortFigure = (r: ResultEntry): TileFigure | undefined => {
    const label = sortFigureLabel(dataSort);
    if (label === undefined || dataSort === title) return undefined;
    const v = r.metadata[dataSort];
    const value =
      v === undefined || v === null
        ? '—'
        : typeof v === 'number'
          ? formatNumber(v)
          : Array.isArray(v)
            ? v.join(', ')
            : String(v);
    return { label, value };
  };
  // A product's count opens its variants: its items, filtered by the group field, ungrouped.
  const showVariants = (value: string | number | boolean) =>
    change({ q: withValues(typed, GROUP_FIELD, [String(value)]), allVariants: true, page: 1 });
  const productFiltered = groupField !== undefined && shown.values[GROUP_FIELD] !== undefined;
  // From the detail panel, whose variant counts are over the whole dataset: all of the product's
  // variants, whatever the filter, so the number matches the tiles it opens.
  const showProduct = (value: string | number | boolean) => {
    setDetail(undefined);
    setLens(undefined);
    change({ q: withValues('', GROUP_FIELD, [String(value)]), allVariants: true, page: 1 });
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
          {canLens ? (
            <LensPicker
              busy={!!lens && !lens.results && !lens.error}
              onFile={(f) => void runLens(f)}
            />
          ) : null}
        </div>
      </div>

      {notReady ? (
        <p class="notice" role="status">
          Search opens once the dataset has 200 processed items. {notReady} Checking again every few
          seconds…
        </p>
      ) : null}
      <ErrorBanner error={error} />
      {canSearch ? null : (
        <p class="notice" role="status" data-testid="no-search">
          This link does not allow browsing the catalogue
          {canLens ? '; search by photo instead.' : '.'}
        </p>
      )}

      {canSearch ? (
        <QBar
          value={typed}
          sent={qProblem?.sent ?? q}
          problem={qProblem?.problem}
          onInput={setTyped}
          onSubmit={applyQ}
        />
      ) : null}

      <div class="catalogue-body">
        <FacetSidebar
          facetFields={sideFacets}
          numericFields={numericFields}
          facets={data?.facets ?? {}}
          stats={data?.stats ?? {}}
          histograms={data?.histograms ?? {}}
          selection={shown}
          onValues={(field, values) => applyQ(withValues(typed, field, values))}
          onRange={(field, r) => applyQ(withRange(typed, field, r))}
          onClear={() =>
            applyQ(
              withoutFields(typed, [
                ...facetFields,
                ...numericFields,
                ...(groupField ? [groupField] : []),
              ]),
            )
          }
        />

        {lens ? (
          <section class="results" aria-labelledby="lens-title">
            <div class="results-head">
              <h2 id="lens-title">Search by photo</h2>
              <div class="section-actions">
                <VaryControl vary={vary} onChange={setVary} />
                <button type="button" class="secondary" onClick={() => setLens(undefined)}>
                  Back to the catalogue
                </button>
              </div>
            </div>
            <div class="lens-query">
              {lens.preview ? <img src={lens.preview} alt="the photo searched for" /> : null}
              <p class="muted" role="status">
                {lens.results
                  ? `${lens.results.length} most similar ${lens.grouped ? 'products' : 'items'}${q ? ' matching the filters' : ''}`
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
                onGroup={(value) => {
                  setLens(undefined);
                  showVariants(value);
                }}
              />
            ) : null}
          </section>
        ) : canSearch ? (
          <section class="results" aria-labelledby="results-title" aria-busy={loading}>
            <div class="results-head">
              <h2 id="results-title" aria-live="polite">
                {counts?.grouped ? (
                  <>
                    {counts.exact ? '' : 'about '}
                    <span class="total" data-total={total}>
                      {total}
                    </span>{' '}
                    {total === 1 ? 'product' : 'products'}{' '}
                    <span class="muted total-items" data-total={counts.items}>
                      ({counted(counts.items, 'item', 'items')})
                    </span>
                  </>
                ) : counts ? (
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
                {productFiltered ? (
                  <button
                    type="button"
                    class="secondary small"
                    onClick={() =>
                      change({
                        q: withoutFields(typed, [GROUP_FIELD]),
                        allVariants: false,
                        page: 1,
                      })
                    }
                  >
                    ← All products
                  </button>
                ) : null}
                {groupField ? (
                  <label class="variants-switch">
                    <input
                      type="checkbox"
                      role="switch"
                      checked={allVariants}
                      onChange={(e) => change({ allVariants: e.currentTarget.checked, page: 1 })}
                    />
                    Show all variants
                  </label>
                ) : null}
                <SortControls
                  fields={[...numericFields, ...facetFields]}
                  sort={sort}
                  order={order}
                  onChange={(nextSort, nextOrder) =>
                    change({ sort: nextSort, order: nextOrder, page: 1 })
                  }
                />
                <TitleControl
                  fields={stringFields}
                  title={title}
                  onChange={(field) => {
                    rememberTitle(vision.org, vision.dataset, field);
                    change({ title: field });
                  }}
                />
              </div>
            </div>
            {data && data.results.length === 0 ? (
              <p class="muted">
                {total > 0
                  ? `Page ${page} is past the last page.`
                  : 'Nothing matches these filters.'}
              </p>
            ) : null}
            {data ? (
              <ResultGrid
                label="Catalogue"
                results={data.results}
                onOpen={open}
                title={itemTitle}
                figure={sortFigure}
                onGroup={showVariants}
              />
            ) : null}
            {data && total > 0 ? (
              <Pager
                page={page}
                pages={pages}
                limit={limit}
                onPage={(n) => change({ page: n })}
                onLimit={(n) => change({ limit: n, page: 1 })}
              />
            ) : null}
          </section>
        ) : null}
      </div>

      {detail ? (
        <DetailPanel
          vision={vision}
          item={detail}
          title={itemTitle}
          group={group}
          vary={vary}
          onVary={setVary}
          allowed={allowed}
          onOpen={(r) => open(r)}
          onVariants={showProduct}
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
