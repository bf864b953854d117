import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { rememberedTitle } from './title';
import { addressOf, DEFAULT_VIEW, navigate, readLocation, type View } from './url-state';

/**
 * A dataset's catalogue view, kept in the address bar: read from it on mount (a link made for
 * another dataset is not applied), written back on every change (`push`: a step back and forward
 * go through; `replace`: a correction that is no step of its own), and followed on back and
 * forward. A title field chosen earlier in this browser applies when the address names none.
 */
export function useAddressView(
  org: string,
  dataset: string,
): [View, (patch: Partial<View>, how?: 'push' | 'replace') => void] {
  const withTitle = (v: View): View => {
    const title = v.title ?? rememberedTitle(org, dataset);
    return title ? { ...v, title } : v;
  };
  const [view, setView] = useState<View>(() => {
    const here = readLocation();
    return withTitle(!here.dataset || here.dataset === dataset ? here.view : DEFAULT_VIEW);
  });
  const current = useRef(view);

  useLayoutEffect(() => {
    navigate(addressOf(dataset, current.current), 'replace');
  }, [dataset]);

  useEffect(() => {
    const onPop = () => {
      const here = readLocation();
      if (here.dataset !== dataset) return; // the app leaves the catalogue (app.tsx)
      current.current = withTitle(here.view);
      setView(current.current);
    };
    window.addEventListener('popstate', onPop);
    return () => window.removeEventListener('popstate', onPop);
  }, [org, dataset]);

  const change = (patch: Partial<View>, how: 'push' | 'replace' = 'push') => {
    current.current = { ...current.current, ...patch };
    setView(current.current);
    navigate(addressOf(dataset, current.current), how);
  };
  return [view, change];
}
