import { useEffect, useState } from 'preact/hooks';
import type { AnalyticsReport, Dataset, OrgApi, ProcessingError } from '../api';
import { BarChart } from '../components/bar-chart';
import { ErrorBanner } from '../components/error-banner';
import { useOnChange, usePolling } from '../lib/hooks';

const DAYS = 14;

/**
 * One dataset for its organisation: the browse token (rotate it), processing errors with their
 * codes, the array fields enabled for querying, and requests per type per day (analytics report).
 */
export function DatasetAdmin({
  orgApi,
  dataset,
  onChanged,
  onBrowse,
}: {
  orgApi: OrgApi;
  dataset: Dataset;
  onChanged: (d: Dataset) => void;
  onBrowse: (d: Dataset) => void;
}) {
  return (
    <section class="panel admin" aria-labelledby="admin-title" data-dataset={dataset.name}>
      <div class="section-head">
        <h2 id="admin-title">{dataset.name}</h2>
        <button type="button" onClick={() => onBrowse(dataset)}>
          Browse the catalogue
        </button>
      </div>
      <BrowseToken orgApi={orgApi} dataset={dataset} onChanged={onChanged} />
      <ProcessingErrors orgApi={orgApi} dataset={dataset} />
      <FieldSettings orgApi={orgApi} dataset={dataset} onChanged={onChanged} />
      <RequestsChart orgApi={orgApi} dataset={dataset.name} />
    </section>
  );
}

function BrowseToken({
  orgApi,
  dataset,
  onChanged,
}: {
  orgApi: OrgApi;
  dataset: Dataset;
  onChanged: (d: Dataset) => void;
}) {
  const [reveal, setReveal] = useState(false);
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [rotated, setRotated] = useState(false);
  useOnChange(dataset.name, () => {
    setConfirm(false);
    setRotated(false);
    setReveal(false);
  });
  const token = dataset.browse_token;
  const link = `${location.origin}/#token=${encodeURIComponent(token)}`;
  const rotate = async () => {
    setBusy(true);
    setError(undefined);
    try {
      onChanged(await orgApi.rotateBrowseToken(dataset.name));
      setRotated(true);
      setReveal(true);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
      setConfirm(false);
    }
  };
  return (
    <div class="sub">
      <h3>Browse token</h3>
      <p class="hint">
        The dataset token for the Vision API, meant for client-side use. A link that opens this
        console on the catalogue:
      </p>
      <div class="token-row">
        <input
          class="mono"
          readOnly
          aria-label="Browse token"
          data-testid="browse-token"
          value={reveal ? token : `${token.slice(0, 7)}${'•'.repeat(12)}`}
        />
        <button type="button" class="secondary small" onClick={() => setReveal(!reveal)}>
          {reveal ? 'Hide' : 'Show'}
        </button>
      </div>
      {reveal ? (
        <p class="hint break">
          <a href={link} target="_blank" rel="noopener noreferrer">
            {link}
          </a>
        </p>
      ) : null}
      {rotated ? (
        <p class="notice" role="status">
          New browse token issued; the old one no longer works.
        </p>
      ) : null}
      {confirm ? (
        <div class="confirm" role="group" aria-label="Confirm rotation">
          <span>Clients using the current token will stop working.</span>
          <button type="button" class="danger small" disabled={busy} onClick={() => void rotate()}>
            Rotate now
          </button>
          <button type="button" class="secondary small" onClick={() => setConfirm(false)}>
            Cancel
          </button>
        </div>
      ) : (
        <button type="button" class="secondary small" onClick={() => setConfirm(true)}>
          Rotate browse token…
        </button>
      )}
      <ErrorBanner error={error} />
    </div>
  );
}

function ProcessingErrors({ orgApi, dataset }: { orgApi: OrgApi; dataset: Dataset }) {
  const [rows, setRows] = useState<{ errors: ProcessingError[]; total: number }>();
  const [error, setError] = useState<unknown>();
  const count = dataset.counts.errors;
  // Read again whenever the polled error count changes.
  useEffect(() => {
    let live = true;
    orgApi
      .errors(dataset.name)
      .then((r) => live && setRows({ errors: r.errors, total: r.total_results }))
      .catch((e: unknown) => live && setError(e));
    return () => {
      live = false;
    };
  }, [orgApi, dataset.name, count]);
  return (
    <div class="sub">
      <h3>Processing errors{rows ? ` (${rows.total})` : ''}</h3>
      <ErrorBanner error={error} />
      {rows && rows.errors.length === 0 ? <p class="muted">None.</p> : null}
      {rows && rows.errors.length ? (
        <div class="table-wrap">
          <table class="errors">
            <thead>
              <tr>
                <th scope="col">Item</th>
                <th scope="col">Code</th>
                <th scope="col">Message</th>
                <th scope="col" class="num">
                  Attempts
                </th>
                <th scope="col">When</th>
              </tr>
            </thead>
            <tbody>
              {rows.errors.map((e) => (
                <tr key={e.id}>
                  <th scope="row" class="break" title={e.url}>
                    {e.id}
                  </th>
                  <td>
                    <code class="code">{e.code}</code>
                  </td>
                  <td class="break">{e.message}</td>
                  <td class="num">{e.attempts}</td>
                  <td>{new Date(e.occurred_at).toLocaleString('en-GB')}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {rows.total > rows.errors.length ? (
            <p class="hint">
              The first {rows.errors.length} of {rows.total}.
            </p>
          ) : null}
        </div>
      ) : null}
    </div>
  );
}

function FieldSettings({
  orgApi,
  dataset,
  onChanged,
}: {
  orgApi: OrgApi;
  dataset: Dataset;
  onChanged: (d: Dataset) => void;
}) {
  const saved = JSON.stringify(dataset.settings.fields, null, 2);
  const [text, setText] = useState(saved);
  const [error, setError] = useState<unknown>();
  const [done, setDone] = useState(false);
  useOnChange(`${dataset.name}\n${dataset.settings.version}`, () => {
    setText(saved);
    setError(undefined);
  });
  const save = async () => {
    setError(undefined);
    setDone(false);
    let fields: Record<string, string[]>;
    try {
      fields = JSON.parse(text) as Record<string, string[]>;
    } catch {
      setError(new Error('not valid JSON: expected { "field": ["value", …] } or ["*"]'));
      return;
    }
    try {
      onChanged(await orgApi.setFields(dataset.name, fields));
      setDone(true);
    } catch (e) {
      setError(e);
    }
  };
  const id = 'fields-json';
  return (
    <form
      class="sub"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <h3>Array fields enabled for querying</h3>
      <label for={id} class="hint">
        Field → values that <code>q</code> may use (<code>["*"]</code> for all). Settings version{' '}
        {dataset.settings.version}.
      </label>
      <textarea
        id={id}
        class="mono"
        rows={Math.min(10, Math.max(3, text.split('\n').length))}
        spellcheck={false}
        value={text}
        onInput={(e) => {
          setText(e.currentTarget.value);
          setDone(false);
        }}
      />
      <div class="actions">
        <button type="submit" class="secondary small" disabled={text === saved}>
          Save fields
        </button>
        {done ? (
          <span class="muted" role="status">
            Saved (version {dataset.settings.version}).
          </span>
        ) : null}
      </div>
      <ErrorBanner error={error} />
    </form>
  );
}

/** Requests per type per day over the last two weeks (GET …/analytics?interval=day). */
function RequestsChart({ orgApi, dataset }: { orgApi: OrgApi; dataset: string }) {
  const [report, setReport] = useState<AnalyticsReport>();
  const [error, setError] = useState<unknown>();
  usePolling(
    async () => {
      try {
        const from = new Date(Date.now() - (DAYS - 1) * 86_400_000);
        setReport(await orgApi.analytics(dataset, from, 'day'));
        setError(undefined);
      } catch (e) {
        setError(e);
      }
    },
    30_000,
    [orgApi, dataset],
  );
  const types = [
    ...new Set(report?.intervals.flatMap((i) => Object.keys(i.requests)) ?? []),
  ].sort();
  return (
    <div class="sub">
      <h3>Requests per day</h3>
      <ErrorBanner error={error} />
      {report ? (
        <BarChart
          title={`Requests per type per day, ${dataset}`}
          labels={report.intervals.map((i) => i.from.slice(5, 10))}
          series={types.map((t) => ({
            name: t,
            values: report.intervals.map((i) => i.requests[t] ?? 0),
          }))}
        />
      ) : null}
      {report ? (
        <p class="hint">
          {report.searches.count} searches, {report.searches.zero_results} with no result.
        </p>
      ) : null}
    </div>
  );
}
