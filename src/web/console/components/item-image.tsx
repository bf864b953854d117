import { useState } from 'preact/hooks';
import type { Metadata } from '../api';

/**
 * An item's picture. The service keeps no image (it discards each one after processing), so the
 * console shows the original image URL the item was processed from (`image_url`, asked for with
 * `fields=*`); the page's CSP allows images from any http(s) origin for this reason.
 */
function imageUrl(metadata: Metadata): string | undefined {
  const u = metadata.image_url;
  return typeof u === 'string' && /^https?:\/\//i.test(u) ? u : undefined;
}

export function ItemImage({ metadata, alt = '' }: { metadata: Metadata; alt?: string }) {
  const src = imageUrl(metadata);
  const [broken, setBroken] = useState(false);
  if (!src || broken)
    return (
      <span class="img-missing" role={alt ? 'img' : undefined} aria-label={alt || undefined}>
        no image
      </span>
    );
  return (
    <img
      src={src}
      alt={alt}
      loading="lazy"
      decoding="async"
      referrerpolicy="no-referrer"
      onError={() => setBroken(true)}
    />
  );
}
