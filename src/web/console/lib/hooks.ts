import { useEffect, useLayoutEffect, useRef } from 'preact/hooks';

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

/**
 * Calls `onEscape` when Escape is pressed anywhere, while `active`. The listener is attached as
 * the component is committed (a layout effect): a plain effect waits for the next frame, and an
 * Escape pressed as soon as the panel shows would be lost, leaving a panel that never closes.
 */
export function useEscape(active: boolean, onEscape: () => void): void {
  const latest = useRef(onEscape);
  latest.current = onEscape;
  useLayoutEffect(() => {
    if (!active) return;
    const key = (e: KeyboardEvent) => {
      if (e.key === 'Escape' && !e.defaultPrevented) latest.current();
    };
    document.addEventListener('keydown', key);
    return () => document.removeEventListener('keydown', key);
  }, [active]);
}

/**
 * Calls `reset` when `key` changes, never on mount, as the change is committed. Resetting local
 * state with a plain effect keyed on the props also runs on mount, a frame late, and wipes what a
 * user typed into a freshly shown form in that frame.
 */
export function useOnChange(key: string, reset: () => void): void {
  const seen = useRef(key);
  const latest = useRef(reset);
  latest.current = reset;
  useLayoutEffect(() => {
    if (seen.current === key) return;
    seen.current = key;
    latest.current();
  }, [key]);
}
