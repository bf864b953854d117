import { useRef, useState } from 'preact/hooks';
import type { Dataset, OrgApi } from '../api';
import { DatasetTable } from '../components/dataset-table';
import { ErrorBanner } from '../components/error-banner';
import { useDatasetEvents, type DatasetProgress } from '../lib/dataset-events';
import { usePolling } from '../lib/hooks';
import { DatasetAdmin } from './dataset-admin';
import { UsagePanel } from './usage-panel';

/** The list itself (datasets created or deleted elsewhere) while progress comes live. */
const LIST_POLL_MS = 30_000;
/** Progress by polling, while the subscription's socket is down. */
const FALLBACK_POLL_MS = 3000;

/**
 * What an organisation token sees: its datasets with live processing progress (the
 * `datasetEvents` subscription, or polling while its socket is down), a form to create one, the
 * selected dataset's administration, and usage against the plan.
 */
export function OrgView({
  orgApi,
  onBrowse,
  onDuplicates,
}: {
  orgApi: OrgApi;
  onBrowse: (d: Dataset) => void;
  /** Opens a dataset's near-duplicate report. */
  onDuplicates: (dataset: string) => void;
}) {
  const [datasets, setDatasets] = useState<Dataset[]>();
  const [selected, setSelected] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [updated, setUpdated] = useState<Date>();
  // When each dataset's last event arrived: a list asked for before it must not undo it.
  const eventAt = useRef(new Map<string, number>());

  const refresh = async () => {
    try {
      const asked = Date.now();
      const answer = await orgApi.listDatasets();
      setDatasets((shown) =>
        answer.map((d) => {
          const newer =
            (eventAt.current.get(d.name) ?? 0) > asked
              ? shown?.find((x) => x.name === d.name)
              : undefined;
          return newer ? { ...d, counts: newer.counts, status: newer.status } : d;
        }),
      );
      setUpdated(new Date());
      setError(undefined);
      setSelected((s) => s ?? answer[0]?.name);
    } catch (e) {
      setError(e);
    }
  };
  const patch = (name: string, progress: DatasetProgress) => {
    eventAt.current.set(name, Date.now());
    setDatasets((list) => list?.map((d) => (d.name === name ? { ...d, ...progress } : d)));
    setUpdated(new Date());
  };
  const names = (datasets ?? []).map((d) => d.name);
  const live = useDatasetEvents(orgApi.api.token, orgApi.org, names, patch);
  usePolling(refresh, live === 'down' ? FALLBACK_POLL_MS : LIST_POLL_MS, [orgApi]);

  const replace = (d: Dataset) =>
    setDatasets((list) => {
      const rest = (list ?? []).filter((x) => x.name !== d.name);
      return [...rest, d].sort((a, b) => (a.name < b.name ? -1 : 1));
    });
  const current = datasets?.find((d) => d.name === selected);

  return (
    <div class="org">
      <div class="view-head">
        <h1>
          <span class="muted">Organisation</span> {orgApi.org}
        </h1>
      </div>
      <div class="org-body">
        <div class="org-main">
          <section class="panel" aria-labelledby="datasets-title">
            <div class="section-head">
              <h2 id="datasets-title">Datasets</h2>
              <span class="hint" aria-live="off" data-progress={live}>
                {updated ? `live · ${updated.toLocaleTimeString('en-GB')}` : 'loading…'}
              </span>
            </div>
            <ErrorBanner error={error} />
            {datasets ? (
              <DatasetTable
                datasets={datasets}
                selected={selected}
                onSelect={setSelected}
                onBrowse={onBrowse}
              />
            ) : null}
            <CreateDataset
              orgApi={orgApi}
              onCreated={(d) => {
                replace(d);
                setSelected(d.name);
              }}
            />
          </section>
          {current ? (
            <DatasetAdmin
              orgApi={orgApi}
              dataset={current}
              onChanged={replace}
              onBrowse={onBrowse}
              onDuplicates={onDuplicates}
            />
          ) : null}
        </div>
        <UsagePanel orgApi={orgApi} />
      </div>
    </div>
  );
}

function CreateDataset({ orgApi, onCreated }: { orgApi: OrgApi; onCreated: (d: Dataset) => void }) {
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  return (
    <form
      class="create"
      onSubmit={(e) => {
        e.preventDefault();
        setBusy(true);
        setError(undefined);
        orgApi
          .createDataset(name.trim())
          .then((d) => {
            setName('');
            onCreated(d);
          })
          .catch((err: unknown) => setError(err))
          .finally(() => setBusy(false));
      }}
    >
      <label for="new-dataset">New dataset</label>
      <input
        id="new-dataset"
        value={name}
        placeholder="shoes"
        pattern="[A-Za-z0-9_\-]{1,100}"
        title="1–100 letters, digits, - or _"
        required
        onInput={(e) => setName(e.currentTarget.value)}
      />
      <button type="submit" disabled={busy || !name.trim()}>
        Create
      </button>
      <ErrorBanner error={error} />
    </form>
  );
}
