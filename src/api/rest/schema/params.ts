import { z } from 'zod';

// Query and path parameters as the REST routes read them. Query values arrive as text; these
// schemas check and convert them, and /openapi.json shows the type they carry.

const INTEGER = /^-?\d{1,15}$/;

/** Text as given (services read lists and the `q` grammar out of it). */
export const text = (description: string) => z.string().meta({ description }).optional();

/** An integer; empty means absent. Bounds are the service's business (they depend on the route). */
export const integer = (description: string) =>
  z
    .string()
    .refine((v) => v === '' || INTEGER.test(v.trim()), { error: 'must be an integer' })
    .transform((v) => (v === '' ? undefined : Number(v)))
    .meta({ description, type: 'integer' })
    .optional();

const DECIMAL = /^-?(\d{1,15}(\.\d{0,30})?|\.\d{1,30})$/;

/** A decimal number; empty means absent. Bounds are the service's business. */
export const decimal = (description: string) =>
  z
    .string()
    .refine((v) => v === '' || DECIMAL.test(v.trim()), { error: 'must be a number' })
    .transform((v) => (v === '' ? undefined : Number(v)))
    .meta({ description, type: 'number' })
    .optional();

/** `true` or `false`; empty means absent. */
export const flag = (description: string) =>
  z
    .string()
    .refine((v) => v === '' || v === 'true' || v === 'false', {
      error: 'must be true or false',
    })
    .transform((v) => (v === '' ? undefined : v === 'true'))
    .meta({ description, type: 'boolean' })
    .optional();

const name = (description: string) => z.string().meta({ description });

export const orgParams = z.object({ organisation: name('Organisation name') });
export const datasetParams = orgParams.extend({ dataset: name('Dataset name') });
export const tokenParams = orgParams.extend({
  prefix: name('The public prefix of an organisation token, e.g. org_AbCdEf012345'),
});

// The parameters every Vision API result list shares (contract §6, §7).
export const fields = text(
  'Comma-separated metadata fields to return; `*` for all; generated image_width, image_height, image_url, service_created_at, service_updated_at may be named',
);
export const q = text(
  'Filter on metadata (contract §5): `field:value`, `field:min:max`, `field:!value`, joined by commas',
);
export const limit = integer('Results per page');
export const v = text(
  'Action variables: comma-separated key:value pairs (e.g. a:search,user_id:…,page_view_id:…), recorded with the request',
);
export const paging = {
  limit: integer('Items to return'),
  offset: integer('Index of the first item'),
};
