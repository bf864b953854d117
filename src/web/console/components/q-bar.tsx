import { useEffect, useRef } from 'preact/hooks';
import type { ErrorDetail } from '../api';

export interface QProblem {
  message: string;
  /** Problems with a position inside the typed text (contract §2: `details[].position`). */
  details: ErrorDetail[];
}

/**
 * The `q` filter bar. A 400 for a malformed q carries the 0-based position of each problem;
 * the bar echoes the text it sent with the character at that position marked and a caret
 * under it (the text is sent unchanged, so positions point into it). The sidebar edits this
 * same text, so a click on a facet or a histogram bar shows its condition in q syntax.
 */
export function QBar({
  value,
  sent,
  problem,
  onInput,
  onSubmit,
  id = 'q',
  label = 'Filter',
  embedded = false,
}: {
  value: string;
  /** The text of the request that failed. */
  sent: string;
  problem?: QProblem;
  onInput: (v: string) => void;
  /** Apply (a bar of its own); unused when embedded, where the enclosing form submits. */
  onSubmit?: (v: string) => void;
  /** Prefix of the element ids (`<id>-input`, `<id>-error`, `<id>-help`). */
  id?: string;
  label?: string;
  /** A field of an enclosing form (no form, no Apply button of its own). */
  embedded?: boolean;
}) {
  const input = useRef<HTMLInputElement>(null);
  const positions = (problem?.details ?? [])
    .map((d) => d.position)
    .filter((p): p is number => typeof p === 'number' && p >= 0 && p <= sent.length);
  const first = positions.length ? Math.min(...positions) : undefined;

  // Put the cursor on the problem, as an editor would.
  useEffect(() => {
    if (first === undefined || !input.current) return;
    input.current.focus();
    input.current.setSelectionRange(first, Math.min(first + 1, sent.length));
  }, [problem, first, sent]);

  const inputId = `${id}-input`;
  const errorId = `${id}-error`;
  const helpId = `${id}-help`;
  const fields = (
    <>
      <label for={inputId}>{label}</label>
      <div class="q-row">
        <input
          id={inputId}
          ref={input}
          class="mono"
          type="text"
          value={value}
          placeholder="colour:red|blue,price:10:50,text:leather"
          spellcheck={false}
          autocomplete="off"
          aria-invalid={problem ? 'true' : undefined}
          aria-describedby={problem ? errorId : helpId}
          onInput={(e) => onInput(e.currentTarget.value)}
        />
        {embedded ? null : <button type="submit">Apply</button>}
        {!embedded && (value || sent) ? (
          <button
            type="button"
            class="secondary"
            onClick={() => {
              onInput('');
              onSubmit?.('');
            }}
          >
            Clear
          </button>
        ) : null}
      </div>
      {problem ? (
        <div id={errorId} class="q-error" role="alert">
          {first !== undefined ? (
            <div class="q-echo-wrap" aria-hidden="true">
              <pre class="q-echo mono">
                {sent.slice(0, first)}
                <mark class="q-mark" data-position={first}>
                  {sent[first] ?? ' '}
                </mark>
                {sent.slice(first + 1)}
              </pre>
              <pre class="q-caret mono">{`${' '.repeat(first)}^`}</pre>
            </div>
          ) : null}
          <ul>
            {(problem.details.length ? problem.details : [{ message: problem.message }]).map(
              (d, i) => (
                <li key={i}>
                  {typeof d.position === 'number' ? `at ${d.position}: ` : ''}
                  {d.message}
                </li>
              ),
            )}
          </ul>
        </div>
      ) : (
        <p id={helpId} class="hint">
          <code>key:value</code>, <code>key:a|b</code>, <code>key:!a</code>,{' '}
          <code>key:min:max</code>, <code>text:words</code>; join with commas.
        </p>
      )}
    </>
  );
  if (embedded)
    return (
      <div class="q-bar embedded" role="group" aria-label={label}>
        {fields}
      </div>
    );
  return (
    <form
      class="q-bar"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        onSubmit?.(value);
      }}
    >
      {fields}
    </form>
  );
}
