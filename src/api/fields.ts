// Which metadata a result shows: shaping shared by both transports (services return whole items).
import type { StoredItem } from '../domain/item';
import type { Scalar } from '../domain/metadata';
import { GENERATED_FIELDS, SERVICE_TIME_FIELDS } from '../domain/limits';
import { keyed } from '../domain/keyed';

/** `fields` as requested: none, all public metadata plus generated fields (`*`), or a list. */
export type FieldSelection = { all: true } | { all: false; names: string[] };

/** `fields` as REST carries it (comma-separated) or as a list (GraphQL). */
export function parseFieldSelection(
  fields: string | readonly string[] | undefined,
): FieldSelection {
  if (fields === undefined) return { all: false, names: [] };
  const list = typeof fields === 'string' ? fields.split(',') : fields;
  const names = [...new Set(list.map((f) => f.trim()).filter(Boolean))];
  return names.includes('*') ? { all: true } : { all: false, names };
}

function generatedValue(item: StoredItem, field: string): Scalar | undefined {
  switch (field) {
    case 'image_width':
      return item.image?.width;
    case 'image_height':
      return item.image?.height;
    case 'image_url':
      return item.image?.url;
    case 'service_created_at':
      return new Date(item.createdAt).toISOString();
    case 'service_updated_at':
      return new Date(item.updatedAt).toISOString();
    // 0 until the event log counts something for the item (contract §14)
    case 'service_popularity':
      return item.counts?.popularity ?? 0;
    case 'service_purchases':
      return item.counts?.purchases ?? 0;
    default:
      return undefined;
  }
}

const GENERATED: readonly string[] = [...GENERATED_FIELDS, ...SERVICE_TIME_FIELDS];

/** The public metadata a caller asked for; privateMetadata never leaves through the Vision API. */
export function projectMetadata(item: StoredItem, sel: FieldSelection): Record<string, unknown> {
  const names = sel.all ? [...Object.keys(item.metadata), ...GENERATED] : sel.names;
  const out = keyed<unknown>();
  for (const n of names) {
    const v = GENERATED.includes(n)
      ? generatedValue(item, n)
      : Object.hasOwn(item.metadata, n)
        ? item.metadata[n]
        : undefined;
    if (v !== undefined) out[n] = v;
  }
  return out;
}
