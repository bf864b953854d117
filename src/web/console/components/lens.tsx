import { useEffect, useRef, useState } from 'preact/hooks';
import { firstImage } from '../lib/image';

/**
 * "Search by photo": a file input (keyboard reachable: the input itself takes the focus) and,
 * through `useDrop`, the whole page as a drop zone for a photo.
 */
export function LensPicker({ onFile, busy }: { onFile: (f: File) => void; busy: boolean }) {
  return (
    <label class={busy ? 'button file-button busy' : 'button file-button'}>
      <input
        type="file"
        class="visually-hidden"
        accept="image/png,image/jpeg"
        data-testid="lens-input"
        disabled={busy}
        onChange={(e) => {
          const f = firstImage(e.currentTarget.files);
          e.currentTarget.value = '';
          if (f) onFile(f);
        }}
      />
      {busy ? 'Searching…' : 'Search by photo'}
    </label>
  );
}

const hasFiles = (e: DragEvent) => !!e.dataTransfer && [...e.dataTransfer.types].includes('Files');

/** While mounted, a photo dropped anywhere on the page goes to `onFile`; returns "dragging". */
export function useDrop(onFile: (f: File) => void): boolean {
  const [dragging, setDragging] = useState(false);
  const latest = useRef(onFile);
  latest.current = onFile;
  useEffect(() => {
    let depth = 0;
    const enter = (e: DragEvent) => {
      if (!hasFiles(e)) return;
      depth++;
      setDragging(true);
    };
    const over = (e: DragEvent) => {
      if (!hasFiles(e)) return;
      e.preventDefault(); // allows the drop
      if (e.dataTransfer) e.dataTransfer.dropEffect = 'copy';
    };
    const leave = (e: DragEvent) => {
      if (!hasFiles(e)) return;
      depth = Math.max(0, depth - 1);
      if (depth === 0) setDragging(false);
    };
    const drop = (e: DragEvent) => {
      const f = firstImage(e.dataTransfer?.files);
      depth = 0;
      setDragging(false);
      if (!e.dataTransfer || ![...e.dataTransfer.types].includes('Files')) return;
      e.preventDefault(); // the browser would otherwise open the file
      if (f) latest.current(f);
    };
    window.addEventListener('dragenter', enter);
    window.addEventListener('dragover', over);
    window.addEventListener('dragleave', leave);
    window.addEventListener('drop', drop);
    return () => {
      window.removeEventListener('dragenter', enter);
      window.removeEventListener('dragover', over);
      window.removeEventListener('dragleave', leave);
      window.removeEventListener('drop', drop);
    };
  }, []);
  return dragging;
}
