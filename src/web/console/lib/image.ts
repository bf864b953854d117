/**
 * Turns a dropped or chosen photo into what lens takes (contract §7): a jpeg data URI, scaled
 * down in the browser so the body stays under the 500 KB limit whatever the camera made.
 */

const MAX_EDGE = 512;
const MAX_CHARS = 450_000;

export async function photoDataUri(file: Blob): Promise<string> {
  if (!/^image\//.test(file.type) && file.type !== '')
    throw new Error(`'${file.type}' is not an image`);
  let bitmap: ImageBitmap;
  try {
    bitmap = await createImageBitmap(file);
  } catch {
    throw new Error('this file cannot be read as an image (use a jpeg or png)');
  }
  const scale = Math.min(1, MAX_EDGE / Math.max(bitmap.width, bitmap.height));
  const canvas = document.createElement('canvas');
  canvas.width = Math.max(1, Math.round(bitmap.width * scale));
  canvas.height = Math.max(1, Math.round(bitmap.height * scale));
  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('this browser cannot scale the image');
  ctx.fillStyle = '#fff'; // jpeg has no transparency
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  bitmap.close();
  for (const quality of [0.9, 0.75, 0.6, 0.4]) {
    const uri = canvas.toDataURL('image/jpeg', quality);
    if (uri.length <= MAX_CHARS) return uri;
  }
  throw new Error('the image is too large even after scaling');
}

/** The first image file of a drop, if any. */
export function firstImage(files: FileList | null | undefined): File | undefined {
  return files
    ? [...files].find((f) => /^image\/(png|jpeg)$/.test(f.type) || f.type === '')
    : undefined;
}
