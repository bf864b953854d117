import { useEffect, useRef } from 'preact/hooks';

/**
 * Calls `tick` now and then `ms` after each call finished, while the component is mounted and
 * the tab is visible (a hidden tab catches up as soon as it is shown again).
 */
export function usePolling(tick: () => Promise<void>, ms: number, deps: unknown[]): void {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      timer = undefined;
      if (stopped) return;
      if (!document.hidden) await latest.current().catch(() => undefined);
      if (!stopped) timer = setTimeout(run, ms);
    };
    const visible = () => {
      if (!document.hidden && timer !== undefined) {
        clearTimeout(timer);
        void run();
      }
    };
    document.addEventListener('visibilitychange', visible);
    void run();
    return () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      document.removeEventListener('visibilitychange', visible);
    };
  }, [ms, ...deps]);
}

/** Calls `onEscape` when Escape is pressed anywhere, while `active`. */
export function useEscape(active: boolean, onEscape: () => void): void {
  const latest = useRef(onEscape);
  latest.current = onEscape;
  useEffect(() => {
    if (!active) return;
    const key = (e: KeyboardEvent) => {
      if (e.key === 'Escape' && !e.defaultPrevented) latest.current();
    };
    document.addEventListener('keydown', key);
    return () => document.removeEventListener('keydown', key);
  }, [active]);
}
