/** Numbers fixed by interface.md / contract.md. One place, so transports and engines agree. */
export const LIMITS = {
  itemIdMaxLength: 100,
  contentBodyBytes: 5 * 1024 * 1024,
  lensBodyBytes: 500 * 1024,
  listDefault: 1000,
  listMax: 1000,
  deleteMaxIds: 1000,
  pageSizeDefault: 10,
  pageSizeMin: 2,
  pageSizeMax: 50,
  /** page × limit may reach this many results, no further (contract §6). */
  maxResultWindow: 10_000,
  minProcessedForVision: 200,
  indexedArrayValues: 200,
  metadataKeyMaxLength: 256,
  metadataStringMaxLength: 32_768,
  metadataArrayMaxLength: 1_000,
  qMaxLength: 4_096,
  vMaxLength: 2_048,
  orgNameMax: 64,
  datasetNameMax: 100,
  detailsMaxIds: 1000,
} as const;

/** Fields the service generates; clients may not write them, but may request, sort and filter. */
export const GENERATED_FIELDS = ['image_width', 'image_height', 'image_url'] as const;
export const SERVICE_TIME_FIELDS = ['service_created_at', 'service_updated_at'] as const;
export type ServiceTimeField = (typeof SERVICE_TIME_FIELDS)[number];
export const RESERVED_FIELDS: ReadonlySet<string> = new Set<string>([
  ...GENERATED_FIELDS,
  ...SERVICE_TIME_FIELDS,
]);
export const TEXT_FIELD = 'text';

export const isServiceTimeField = (f: string): f is ServiceTimeField =>
  (SERVICE_TIME_FIELDS as readonly string[]).includes(f);
