import { useState } from 'preact/hooks';
import type { OrgApi, Usage } from '../api';
import { ErrorBanner } from '../components/error-banner';
import { usePolling } from '../lib/hooks';

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

function Meter({
  label,
  used,
  limit,
  unit,
}: {
  label: string;
  used: number;
  limit?: number;
  unit: string;
}) {
  return (
    <div class="meter">
      <div class="meter-label">
        <span>{label}</span>
        <strong>
          {used.toLocaleString('en')}
          {limit !== undefined ? ` of ${limit.toLocaleString('en')}` : ''} {unit}
        </strong>
      </div>
      {limit !== undefined ? (
        <progress max={Math.max(1, limit)} value={Math.min(used, limit)} aria-label={label} />
      ) : (
        <span class="muted">unlimited plan</span>
      )}
    </div>
  );
}

/** Usage against the plan (GET /orgs/:org/usage), refreshed every 15 s. */
export function UsagePanel({ orgApi }: { orgApi: OrgApi }) {
  const [usage, setUsage] = useState<Usage>();
  const [error, setError] = useState<unknown>();
  usePolling(
    async () => {
      try {
        setUsage(await orgApi.usage());
        setError(undefined);
      } catch (e) {
        setError(e);
      }
    },
    15_000,
    [orgApi],
  );
  return (
    <section class="panel" aria-labelledby="usage-title">
      <h2 id="usage-title">
        Usage{usage ? ` · ${MONTHS[usage.credits.month - 1]} ${usage.credits.year}` : ''}
      </h2>
      <ErrorBanner error={error} />
      {usage ? (
        <>
          <Meter
            label="Credits this month"
            used={usage.credits.used}
            limit={usage.credits.limitType === 'fixed' ? usage.credits.limit : undefined}
            unit="credits"
          />
          <Meter
            label={`Images processed in ${usage.images.year}`}
            used={usage.images.processed}
            limit={usage.images.limitType === 'fixed' ? usage.images.limit : undefined}
            unit="images"
          />
          <p class="hint">{usage.images.total.toLocaleString('en')} images in use now.</p>
          <div class="table-wrap">
            <table class="usage">
              <thead>
                <tr>
                  <th scope="col">Dataset</th>
                  <th scope="col" class="num">
                    Images
                  </th>
                  <th scope="col">Requests (credits)</th>
                </tr>
              </thead>
              <tbody>
                {Object.entries(usage.datasets).map(([name, d]) => (
                  <tr key={name}>
                    <th scope="row">
                      {name}
                      {d.deleted ? <span class="muted"> (deleted)</span> : null}
                    </th>
                    <td class="num">{d.images}</td>
                    <td>
                      {d.usage.length
                        ? d.usage.map((u) => `${u.type} ${u.requests} (${u.credits})`).join(', ')
                        : '—'}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <p class="hint">
            Credits per request:{' '}
            {Object.entries(usage.requestCredits)
              .map(([t, c]) => `${t} ${c}`)
              .join(', ')}
            {usage.lastUpdated
              ? ` · up to ${new Date(usage.lastUpdated).toLocaleString('en-GB')}`
              : ''}
          </p>
        </>
      ) : !error ? (
        <p class="muted">Loading usage…</p>
      ) : null}
    </section>
  );
}
