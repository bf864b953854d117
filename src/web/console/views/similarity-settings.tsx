import { useState } from 'preact/hooks';
import type { Dataset, OrgApi } from '../api';
import { ErrorBanner } from '../components/error-banner';
import { useOnChange, usePolling } from '../lib/hooks';

const STATES: Record<string, string> = {
  off: 'Off: similarity ranks by the pictures alone.',
  fitting: 'Fitting: learning from the labels in the background…',
  active: 'Active: similarity ranks with what the labels taught.',
  inactive: 'Inactive: the labels did not improve similarity.',
};

type Setting = NonNullable<Dataset['settings']['similarity']>;

/** What a dataset whose setting was never made shows (its REST object has none, contract §3). */
const NEVER_SET: Setting = {
  learn_from: null,
  weight: 0.75,
  state: 'off',
  reason: null,
  fitted_at: null,
  labelled_items: 0,
  classes: 0,
  cv_precision_at_10: null,
};

/**
 * Tuned similarity (contract §20): the field of labels similarity learns from and its weight,
 * where the fit stands, and the two held-out precisions it was judged by. Polls while fitting.
 */
export function SimilaritySettings({
  orgApi,
  dataset,
  onChanged,
}: {
  orgApi: OrgApi;
  dataset: Dataset;
  onChanged: (d: Dataset) => void;
}) {
  const s = dataset.settings.similarity ?? NEVER_SET;
  const [field, setField] = useState(s.learn_from ?? '');
  const [weight, setWeight] = useState(String(s.weight));
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  useOnChange(`${dataset.name}\n${s.learn_from}\n${s.weight}`, () => {
    setField(s.learn_from ?? '');
    setWeight(String(s.weight));
    setError(undefined);
  });
  usePolling(
    async () => {
      if (s.state !== 'fitting') return;
      const now = await orgApi.getDataset(dataset.name);
      if (now.settings.similarity?.state !== 'fitting') onChanged(now);
    },
    2000,
    [orgApi, dataset.name, s.state],
  );
  const save = async (learnFrom: string | null) => {
    setBusy(true);
    setError(undefined);
    try {
      onChanged(await orgApi.setSimilarity(dataset.name, learnFrom, Number(weight)));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const cv = s.cv_precision_at_10;
  return (
    <form
      class="sub"
      data-testid="similarity-settings"
      onSubmit={(e) => {
        e.preventDefault();
        void save(field.trim() || null);
      }}
    >
      <h3>Tuned similarity</h3>
      <p class="hint" role="status" data-state={s.state}>
        {STATES[s.state] ?? s.state}
        {s.reason ? ` ${s.reason}.` : ''}
      </p>
      {s.state !== 'off' && s.fitted_at ? (
        <p class="hint">
          Fitted {s.fitted_at.slice(0, 16).replace('T', ' ')} on {s.labelled_items} labelled items
          in {s.classes} labels
          {cv ? (
            <>
              ; held-out precision@10 {cv.plain.toFixed(3)} plain, {cv.tuned.toFixed(3)} tuned
            </>
          ) : null}
          .
        </p>
      ) : null}
      <div class="token-row">
        <label for="learn-from">Labels field</label>
        <input
          id="learn-from"
          class="mono"
          placeholder="e.g. category"
          value={field}
          onInput={(e) => setField(e.currentTarget.value)}
        />
        <label for="tuning-weight">Weight</label>
        <input
          id="tuning-weight"
          type="number"
          min={0}
          max={1}
          step={0.05}
          value={weight}
          onInput={(e) => setWeight(e.currentTarget.value)}
        />
      </div>
      <div class="actions">
        <button type="submit" class="secondary small" disabled={busy || !field.trim()}>
          Learn from this field
        </button>
        {s.learn_from !== null ? (
          <button
            type="button"
            class="secondary small"
            disabled={busy}
            onClick={() => void save(null)}
          >
            Switch off
          </button>
        ) : null}
      </div>
      <ErrorBanner error={error} />
    </form>
  );
}
