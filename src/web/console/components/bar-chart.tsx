import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * A small stacked bar chart in inline SVG (no chart library): one bar per period. The drawing
 * is as wide as its box in CSS pixels, so labels keep their size from phone to desktop.
 */

const COLOURS = ['#1a73e8', '#e8710a', '#188038', '#a142f4', '#d93025', '#12b5cb', '#5f6368'];

export interface Series {
  name: string;
  values: number[];
}

export function BarChart({
  labels,
  series,
  title,
}: {
  /** One label per bar (e.g. a day). */
  labels: string[];
  series: Series[];
  title: string;
}) {
  const box = useRef<HTMLElement>(null);
  const [W, setW] = useState(600);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = () => setW(Math.max(200, Math.round(el.clientWidth)));
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  const H = 160;
  const pad = { top: 10, bottom: 22, left: 34, right: 6 };
  const totals = labels.map((_, i) => series.reduce((s, x) => s + (x.values[i] ?? 0), 0));
  const top = Math.max(1, ...totals);
  const slot = (W - pad.left - pad.right) / Math.max(1, labels.length);
  const bar = Math.max(2, slot * 0.7);
  const y = (v: number) => pad.top + (H - pad.top - pad.bottom) * (1 - v / top);
  const every = Math.ceil(labels.length / Math.max(2, Math.floor(W / 90)));
  return (
    <figure class="chart" ref={box}>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={title}>
        <title>{title}</title>
        <line x1={pad.left} x2={W - pad.right} y1={y(0)} y2={y(0)} class="axis" />
        <text x={pad.left - 4} y={y(top) + 4} class="tick" text-anchor="end">
          {top}
        </text>
        <text x={pad.left - 4} y={y(0)} class="tick" text-anchor="end">
          0
        </text>
        {labels.map((label, i) => {
          let base = 0;
          const x = pad.left + slot * i + (slot - bar) / 2;
          return (
            <g key={label}>
              {series.map((s, k) => {
                const v = s.values[i] ?? 0;
                if (!v) return null;
                const r = (
                  <rect
                    key={s.name}
                    x={x}
                    width={bar}
                    y={y(base + v)}
                    height={y(base) - y(base + v)}
                    fill={COLOURS[k % COLOURS.length]}
                  >
                    <title>{`${label} · ${s.name}: ${v}`}</title>
                  </rect>
                );
                base += v;
                return r;
              })}
              {i % every === 0 ? (
                <text x={x + bar / 2} y={H - 6} class="tick" text-anchor="middle">
                  {label}
                </text>
              ) : null}
            </g>
          );
        })}
      </svg>
      <figcaption>
        {series.length ? (
          <ul class="legend">
            {series.map((s, k) => (
              <li key={s.name}>
                <svg width="10" height="10" aria-hidden="true">
                  <rect width="10" height="10" fill={COLOURS[k % COLOURS.length]} />
                </svg>{' '}
                {s.name} ({s.values.reduce((a, b) => a + b, 0)})
              </li>
            ))}
          </ul>
        ) : (
          <span class="muted">No requests in this period.</span>
        )}
      </figcaption>
    </figure>
  );
}
