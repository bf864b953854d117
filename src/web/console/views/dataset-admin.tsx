import { useEffect, useState } from 'preact/hooks';
import {
  ApiError,
  type AnalyticsReport,
  type Dataset,
  type OrgApi,
  type ProcessingError,
} from '../api';
import { BarChart } from '../components/bar-chart';
import { ErrorBanner } from '../components/error-banner';
import { QBar, type QProblem } from '../components/q-bar';
import { useOnChange, usePolling } from '../lib/hooks';
import {
  formatWhen,
  REQUEST_TYPES,
  scopedLink,
  type RequestType,
  type ScopedPayload,
} from '../lib/scoped';
import { SimilaritySettings } from './similarity-settings';

const DAYS = 14;

/**
 * One dataset for its organisation: the browse token (rotate it), a form that shares a scoped
 * link, processing errors with their codes, the array fields enabled for querying, tuned
 * similarity, and requests per type per day (analytics report). Its near-duplicate report is a
 * page of its own.
 */
export function DatasetAdmin({
  orgApi,
  dataset,
  onChanged,
  onBrowse,
  onDuplicates,
}: {
  orgApi: OrgApi;
  dataset: Dataset;
  onChanged: (d: Dataset) => void;
  onBrowse: (d: Dataset) => void;
  onDuplicates: (dataset: string) => void;
}) {
  return (
    <section class="panel admin" aria-labelledby="admin-title" data-dataset={dataset.name}>
      <div class="section-head">
        <h2 id="admin-title">{dataset.name}</h2>
        <div class="actions">
          <button type="button" class="secondary" onClick={() => onDuplicates(dataset.name)}>
            Duplicates
          </button>
          <button type="button" onClick={() => onBrowse(dataset)}>
            Browse the catalogue
          </button>
        </div>
      </div>
      <BrowseToken orgApi={orgApi} dataset={dataset} onChanged={onChanged} />
      <ShareScopedLink orgApi={orgApi} dataset={dataset.name} />
      <ProcessingErrors orgApi={orgApi} dataset={dataset} />
      <FieldSettings orgApi={orgApi} dataset={dataset} onChanged={onChanged} />
      <SimilaritySettings orgApi={orgApi} dataset={dataset} onChanged={onChanged} />
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

const HOUR = 3600;
/** How long a shared link lasts: seconds from now, a chosen time, or no `exp` at all. */
const EXPIRIES = [
  { value: '3600', label: '1 hour' },
  { value: '86400', label: '1 day' },
  { value: '604800', label: '7 days' },
  { value: 'custom', label: 'Custom…' },
  { value: 'never', label: 'Never' },
] as const;
type Expiry = (typeof EXPIRIES)[number]['value'];

/** `datetime-local` text (local time, minutes) of a date. */
const localInput = (d: Date) => {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
};

/**
 * "Share a scoped link" (contract §16): a token minted by the service (`POST …/scoped-tokens`)
 * that only narrows what the browse token allows — a filter ANDed with every request, an
 * expiry, the request types allowed, the metadata fields shown, a rate — and the console link
 * that opens the catalogue with it. The link carries the organisation and dataset, which the
 * token does not name.
 */
function ShareScopedLink({ orgApi, dataset }: { orgApi: OrgApi; dataset: string }) {
  const [q, setQ] = useState('');
  const [expiry, setExpiry] = useState<Expiry>('86400');
  const [custom, setCustom] = useState(() =>
    localInput(new Date(Date.now() + 2 * 24 * HOUR * 1000)),
  );
  const [types, setTypes] = useState<Set<RequestType>>(() => new Set(REQUEST_TYPES));
  const [fields, setFields] = useState('');
  const [rate, setRate] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [qProblem, setQProblem] = useState<{ problem: QProblem; sent: string }>();
  const [made, setMade] = useState<{ link: string; token: string; expires?: Date }>();
  const [copied, setCopied] = useState(false);
  useOnChange(dataset, () => {
    setMade(undefined);
    setError(undefined);
    setQProblem(undefined);
  });

  const scope = (): ScopedPayload | Error => {
    const s: ScopedPayload = {};
    if (q.trim()) s.q = q.trim();
    if (expiry === 'custom') {
      const at = new Date(custom).getTime();
      if (Number.isNaN(at)) return new Error('choose the date and time the link expires');
      if (at <= Date.now()) return new Error('the expiry is in the past');
      s.exp = Math.floor(at / 1000);
    } else if (expiry !== 'never') s.exp = Math.floor(Date.now() / 1000) + Number(expiry);
    // Every type ticked: no `types` (the token allows what the browse token does).
    if (types.size < REQUEST_TYPES.length) s.types = REQUEST_TYPES.filter((t) => types.has(t));
    const list = fields
      .split(',')
      .map((f) => f.trim())
      .filter(Boolean);
    if (list.length) s.fields = list;
    if (rate.trim()) {
      const n = Number(rate);
      if (!Number.isInteger(n) || n < 1)
        return new Error('the rate is a whole number of requests per minute');
      s.rate = n;
    }
    return s;
  };

  const submit = async () => {
    setError(undefined);
    setQProblem(undefined);
    setMade(undefined);
    setCopied(false);
    const s = scope();
    if (s instanceof Error) {
      setError(s);
      return;
    }
    setBusy(true);
    try {
      const token = await orgApi.mintScopedToken(dataset, s);
      setMade({
        token,
        link: scopedLink(token, orgApi.org, dataset),
        ...(s.exp ? { expires: new Date(s.exp * 1000) } : {}),
      });
    } catch (e) {
      // A bad filter: marked in the filter field, as the catalogue's bar does.
      const qDetails =
        e instanceof ApiError
          ? e.details.filter((d) => d.param === 'q' || d.field === 'q' || d.param === 'scope.q')
          : [];
      if (e instanceof ApiError && e.status === 400 && qDetails.length && s.q)
        setQProblem({ problem: { message: e.message, details: qDetails }, sent: s.q });
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const copy = async () => {
    if (!made) return;
    try {
      await navigator.clipboard.writeText(made.link);
      setCopied(true);
    } catch {
      // No clipboard (permissions, plain http): select the text for the user to copy.
      const el = document.getElementById('scoped-link') as HTMLInputElement | null;
      el?.select();
    }
  };

  const toggle = (t: RequestType, on: boolean) =>
    setTypes((prev) => {
      const next = new Set(prev);
      if (on) next.add(t);
      else next.delete(t);
      return next;
    });

  return (
    <form
      class="sub scoped-share"
      aria-labelledby="scoped-title"
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
    >
      <h3 id="scoped-title">Share a scoped link</h3>
      <p class="hint">
        A link to this catalogue that sees only what you allow here: no admin screens, nothing
        outside the filter, and it stops working when it expires or the browse token is rotated.
      </p>
      <QBar
        id="scoped-q"
        label="Only items matching"
        embedded
        value={q}
        sent={qProblem?.sent ?? q}
        problem={qProblem?.problem}
        onInput={(v) => {
          setQ(v);
          setQProblem(undefined);
        }}
      />
      <div class="scoped-grid">
        <div>
          <label for="scoped-exp">Expires after</label>
          <select
            id="scoped-exp"
            value={expiry}
            onChange={(e) => setExpiry(e.currentTarget.value as Expiry)}
          >
            {EXPIRIES.map((x) => (
              <option key={x.value} value={x.value}>
                {x.label}
              </option>
            ))}
          </select>
          {expiry === 'custom' ? (
            <input
              type="datetime-local"
              aria-label="Expires at"
              value={custom}
              onInput={(e) => setCustom(e.currentTarget.value)}
            />
          ) : null}
        </div>
        <fieldset class="scoped-types">
          <legend>Requests allowed</legend>
          {REQUEST_TYPES.map((t) => (
            <label key={t} class="check">
              <input
                type="checkbox"
                name="types"
                value={t}
                checked={types.has(t)}
                onChange={(e) => toggle(t, e.currentTarget.checked)}
              />
              {t}
            </label>
          ))}
        </fieldset>
        <div>
          <label for="scoped-fields">Fields shown</label>
          <input
            id="scoped-fields"
            class="mono"
            placeholder="all fields"
            spellcheck={false}
            autocomplete="off"
            value={fields}
            aria-describedby="scoped-fields-help"
            onInput={(e) => setFields(e.currentTarget.value)}
          />
          <p id="scoped-fields-help" class="hint">
            Comma-separated; empty shows every field.
          </p>
        </div>
        <div>
          <label for="scoped-rate">Requests per minute</label>
          <input
            id="scoped-rate"
            type="number"
            min={1}
            step={1}
            placeholder="no limit of its own"
            value={rate}
            onInput={(e) => setRate(e.currentTarget.value)}
          />
        </div>
      </div>
      <div class="actions">
        <button type="submit" class="small" disabled={busy || types.size === 0}>
          {busy ? 'Making the link…' : 'Make link'}
        </button>
        {types.size === 0 ? <span class="muted">Allow at least one kind of request.</span> : null}
      </div>
      <ErrorBanner error={error} />
      {error instanceof ApiError && error.details.length ? (
        <ul class="error-details">
          {error.details.map((d, i) => (
            <li key={i}>
              {(d.field ?? d.param) ? <code>{d.field ?? d.param}</code> : null}
              {(d.field ?? d.param) ? ': ' : ''}
              {d.message}
            </li>
          ))}
        </ul>
      ) : null}
      {made ? (
        <div class="scoped-made" role="status">
          <label for="scoped-link">
            Link{made.expires ? `, valid until ${formatWhen(made.expires)}` : ', with no expiry'}
          </label>
          <div class="token-row">
            <input
              id="scoped-link"
              class="mono"
              readOnly
              value={made.link}
              data-token={made.token}
              onFocus={(e) => e.currentTarget.select()}
            />
            <button type="button" class="secondary small" onClick={() => void copy()}>
              {copied ? 'Copied' : 'Copy'}
            </button>
          </div>
          <p class="hint break">
            <a href={made.link} target="_blank" rel="noopener noreferrer">
              Open it in a new tab
            </a>
          </p>
        </div>
      ) : null}
    </form>
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
