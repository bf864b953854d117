import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { Api, VisionApi, type DuplicateGroup, type DuplicateReport, type OrgApi } from '../api';
import { ErrorBanner } from '../components/error-banner';
import { ItemImage } from '../components/item-image';
import {
  DEFAULT_DUPLICATES_VIEW,
  duplicatesAddress,
  navigate,
  readDuplicates,
  type DuplicateChoice,
  type DuplicatesView,
} from '../lib/url-state';
import { counted } from '../lib/variants';

/** Groups per page (the report allows 1–100). */
const LIMIT = 20;
/** A report not computed yet, or with processed items waiting for a pass, is asked again. */
const PENDING_POLL_MS = 5000;

const KINDS: { value: DuplicateChoice; label: string }[] = [
  { value: 'both', label: 'exact and near' },
  { value: 'exact', label: 'exact copies' },
  { value: 'near', label: 'near copies' },
];

interface Shown {
  report: DuplicateReport;
  /** Item id → the URL its image was processed from (absent: not known to the Vision API). */
  images: Map<string, string>;
}

/**
 * A dataset's near-duplicate report for its organisation (contract §18): groups of items showing
 * the same picture (`exact`) or near copies of one photo (`near`), each item as a thumbnail with
 * its distance to the group's first item, when the report was computed and whether items wait for
 * the next pass (asked again until none do). The kind and "exclude items sharing a parent" are
 * kept in the address (`?duplicates=<dataset>&kind=…`); pages follow the report's cursor. "Not
 * duplicates" records that a group's items are not duplicates of each other, one item's button
 * that it is not one of the first item; the page is then read again.
 */
export function Duplicates({
  orgApi,
  dataset,
  onBack,
}: {
  orgApi: OrgApi;
  dataset: string;
  onBack: () => void;
}) {
  const [view, setView] = useState<DuplicatesView>(() => {
    const here = readDuplicates();
    return here.dataset === dataset ? here.view : DEFAULT_DUPLICATES_VIEW;
  });
  // The cursor of each page up to the one shown (the first page has none): Previous pops one.
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const cursor = cursors[cursors.length - 1];
  const [shown, setShown] = useState<Shown>();
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<unknown>();
  /** What a dismissal in flight is for: a group id, or `group/item`. */
  const [dismissing, setDismissing] = useState<string>();
  const seq = useRef(0);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);

  useLayoutEffect(() => {
    navigate(duplicatesAddress(dataset, view), 'replace');
  }, [dataset]);

  useEffect(() => {
    const onPop = () => {
      const here = readDuplicates();
      if (here.dataset !== dataset) return; // the app leaves the page (app.tsx)
      setView(here.view);
      setCursors([undefined]);
    };
    window.addEventListener('popstate', onPop);
    return () => window.removeEventListener('popstate', onPop);
  }, [dataset]);

  /** Reads the page shown (its groups, then its items' images); the latest call wins. */
  const load = async () => {
    const n = ++seq.current;
    clearTimeout(timer.current);
    setLoading(true);
    try {
      const { report, browseToken } = await orgApi.duplicates(dataset, {
        ...(view.kind !== 'both' ? { kind: view.kind === 'exact' ? 'EXACT' : 'NEAR' } : {}),
        excludeSameParent: view.excludeSameParent,
        limit: LIMIT,
        ...(cursor !== undefined ? { cursor } : {}),
      });
      const ids = [...new Set(report.groups.flatMap((g) => g.items.map((i) => i.id)))];
      let images = new Map<string, string>();
      let imageError: unknown;
      try {
        if (ids.length)
          images = await new VisionApi(new Api(browseToken), orgApi.org, dataset).imageUrls(ids);
      } catch (e) {
        imageError = e; // the groups are still worth showing
      }
      if (n !== seq.current) return;
      setShown({ report, images });
      setError(imageError);
      if (report.pending || report.computedAt === null)
        timer.current = setTimeout(() => void load(), PENDING_POLL_MS);
    } catch (e) {
      if (n === seq.current) setError(e);
    } finally {
      if (n === seq.current) setLoading(false);
    }
  };

  useEffect(() => {
    void load();
    return () => {
      seq.current++; // an answer still on its way is dropped
      clearTimeout(timer.current);
    };
  }, [orgApi, dataset, view.kind, view.excludeSameParent, cursor]);

  const change = (patch: Partial<DuplicatesView>) => {
    const next = { ...view, ...patch };
    setView(next);
    setCursors([undefined]);
    navigate(duplicatesAddress(dataset, next), 'push');
  };

  const dismiss = async (key: string, ids: string[]) => {
    setDismissing(key);
    setError(undefined);
    try {
      await orgApi.dismissDuplicates(dataset, ids);
      await load();
    } catch (e) {
      setError(e);
    } finally {
      setDismissing(undefined);
    }
  };

  const report = shown?.report;
  const images = shown?.images ?? new Map<string, string>();
  const page = cursors.length;
  return (
    <div class="duplicates" data-dataset={dataset}>
      <div class="view-head">
        <h1>
          <span class="muted">
            {orgApi.org} / {dataset} ·
          </span>{' '}
          Duplicates
        </h1>
        <div class="actions">
          <button type="button" class="secondary" onClick={onBack}>
            ← Datasets
          </button>
        </div>
      </div>
      <section class="panel" aria-labelledby="duplicates-title" aria-busy={loading}>
        <div class="section-head">
          <h2 id="duplicates-title">Near-duplicate report</h2>
          <div class="section-actions">
            <label for="duplicates-kind">Kind</label>
            <select
              id="duplicates-kind"
              value={view.kind}
              onChange={(e) => change({ kind: e.currentTarget.value as DuplicateChoice })}
            >
              {KINDS.map((k) => (
                <option key={k.value} value={k.value}>
                  {k.label}
                </option>
              ))}
            </select>
            <label
              class="variants-switch"
              title="Leave out pairs of items with the same parent: variants of one product"
            >
              <input
                type="checkbox"
                checked={view.excludeSameParent}
                onChange={(e) => change({ excludeSameParent: e.currentTarget.checked })}
              />
              Exclude items sharing a parent
            </label>
          </div>
        </div>
        <p class="hint" data-testid="computed-at">
          {report ? <Computed report={report} /> : loading ? 'Loading the report…' : null}
        </p>
        {report?.pending ? (
          <p class="notice" role="status" data-testid="duplicates-pending">
            Items processed since this report was computed wait for the next pass; this page updates
            when it has run.
          </p>
        ) : null}
        <ErrorBanner error={error} />
        {report && report.groups.length === 0 ? (
          <p class="muted" data-testid="no-duplicates">
            {page > 1
              ? 'No more groups.'
              : report.computedAt
                ? `No duplicates found${view.kind !== 'both' || view.excludeSameParent ? ' with these choices' : ''}.`
                : 'No duplicates yet.'}
          </p>
        ) : null}
        {report?.groups.length ? (
          <ol class="dup-groups" aria-label="Duplicate groups">
            {report.groups.map((g) => (
              <GroupRow
                key={g.id}
                group={g}
                images={images}
                dismissing={dismissing}
                onDismiss={(key, ids) => void dismiss(key, ids)}
              />
            ))}
          </ol>
        ) : null}
        {page > 1 || report?.nextCursor ? (
          <nav class="pager" aria-label="Pages">
            <button
              type="button"
              class="secondary"
              disabled={page <= 1 || loading}
              onClick={() => setCursors((c) => c.slice(0, -1))}
            >
              ← Previous
            </button>
            <span>Page {page}</span>
            <button
              type="button"
              class="secondary"
              disabled={!report?.nextCursor || loading}
              onClick={() => {
                const next = report?.nextCursor;
                if (next) setCursors((c) => [...c, next]);
              }}
            >
              Next →
            </button>
          </nav>
        ) : null}
      </section>
    </div>
  );
}

/** When the report was computed (or that it is not yet), and how many groups the page has. */
function Computed({ report }: { report: DuplicateReport }) {
  if (!report.computedAt)
    return (
      <>
        Not computed yet: the first pass runs once processing settles. Checking again every few
        seconds…
      </>
    );
  const groups = report.groups.length;
  return (
    <>
      Computed{' '}
      <time dateTime={report.computedAt}>
        {new Date(report.computedAt).toLocaleString('en-GB')}
      </time>
      {groups ? ` · ${counted(groups, 'group', 'groups')} on this page` : ''}.
    </>
  );
}

/** One group: its kind, its items as thumbnails with their distances, and the dismissals. */
function GroupRow({
  group,
  images,
  dismissing,
  onDismiss,
}: {
  group: DuplicateGroup;
  images: Map<string, string>;
  dismissing?: string;
  onDismiss: (key: string, ids: string[]) => void;
}) {
  const kind = group.kind === 'EXACT' ? 'exact' : 'near';
  const first = group.items[0]?.id;
  const ids = group.items.map((i) => i.id);
  return (
    <li class="dup-group" data-group={group.id} data-kind={kind}>
      <div class="section-head">
        <h3>
          <span class={`badge ${kind}`}>{kind}</span>{' '}
          <span class="muted">{counted(ids.length, 'item', 'items')}</span>
        </h3>
        <button
          type="button"
          class="secondary small"
          disabled={dismissing !== undefined}
          aria-label={`Not duplicates: ${ids.join(', ')}`}
          onClick={() => onDismiss(group.id, ids)}
        >
          {dismissing === group.id ? 'Dismissing…' : 'Not duplicates'}
        </button>
      </div>
      <ul class="dup-items" aria-label={`${kind} group of ${ids.join(', ')}`}>
        {group.items.map((m) => {
          const url = images.get(m.id);
          const key = `${group.id}/${m.id}`;
          return (
            <li key={m.id} class="dup-item" data-id={m.id} data-distance={m.distance}>
              <ItemImage metadata={url ? { image_url: url } : {}} />
              <span class="tile-id mono">{m.id}</span>
              <span class="tile-line" data-label="distance">
                <span class="tile-label">distance:</span> {m.distance.toFixed(3)}
                {m.id === first ? ' (first item)' : ''}
              </span>
              {first !== undefined && m.id !== first && ids.length > 2 ? (
                <button
                  type="button"
                  class="link small"
                  disabled={dismissing !== undefined}
                  aria-label={`${m.id} is not a duplicate of ${first}`}
                  onClick={() => onDismiss(key, [first, m.id])}
                >
                  {dismissing === key ? 'Dismissing…' : 'Not a duplicate'}
                </button>
              ) : null}
            </li>
          );
        })}
      </ul>
    </li>
  );
}
