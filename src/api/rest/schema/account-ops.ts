import { z } from 'zod';
import { operation } from '../operation';
import * as body from './bodies';
import { datasetParams, integer, orgParams, text, tokenParams } from './params';
import * as shape from './shapes';

// Organisations, tokens, datasets and usage: the admin API (contract §3, §8, §11).

const DS = '/orgs/:organisation/datasets/:dataset';

export const createOrganisation = operation({
  id: 'createOrganisation',
  method: 'POST',
  path: '/orgs',
  summary: 'Create an organisation; answers its first organisation token',
  tag: 'organisations',
  access: 'operator',
  body: body.createOrganisation,
  status: 201,
  response: shape.ok.extend({
    organisation: z.object({ name: z.string(), plan: shape.plan }),
    token: z.string().meta({ description: 'Shown once; store it' }),
  }),
  errors: ['invalid_request', 'conflict'],
});

export const getOrganisation = operation({
  id: 'getOrganisation',
  method: 'GET',
  path: '/orgs/:organisation',
  summary: 'An organisation and its plan',
  tag: 'organisations',
  access: 'organisation',
  params: orgParams,
  status: 200,
  response: shape.ok.extend({ organisation: shape.organisation }),
  errors: ['not_found'],
});

export const setPlan = operation({
  id: 'setPlan',
  method: 'PUT',
  path: '/orgs/:organisation/plan',
  summary: 'Set an organisation’s plan (operator)',
  tag: 'organisations',
  access: 'operator',
  params: orgParams,
  body: body.setPlan,
  status: 200,
  response: shape.ok.extend({
    organisation: z.object({ name: z.string(), plan: shape.plan }),
  }),
  errors: ['invalid_request', 'not_found'],
});

export const issueToken = operation({
  id: 'issueToken',
  method: 'POST',
  path: '/orgs/:organisation/tokens',
  summary: 'Issue another organisation token',
  tag: 'organisations',
  access: 'organisation',
  params: orgParams,
  status: 201,
  response: shape.ok.extend({ token: z.string() }).extend(shape.token.shape),
  errors: ['not_found'],
});

export const listTokens = operation({
  id: 'listTokens',
  method: 'GET',
  path: '/orgs/:organisation/tokens',
  summary: 'The organisation’s tokens (prefixes only)',
  tag: 'organisations',
  access: 'organisation',
  params: orgParams,
  status: 200,
  response: shape.ok.extend({ tokens: z.array(shape.token) }),
  errors: ['not_found'],
});

export const revokeToken = operation({
  id: 'revokeToken',
  method: 'DELETE',
  path: '/orgs/:organisation/tokens/:prefix',
  summary: 'Revoke an organisation token',
  tag: 'organisations',
  access: 'organisation',
  params: tokenParams,
  status: 200,
  response: shape.ok,
  errors: ['invalid_request', 'not_found'],
});

export const usage = operation({
  id: 'usage',
  method: 'GET',
  path: '/orgs/:organisation/usage',
  summary: 'Usage statistics of a month (interface §3)',
  tag: 'organisations',
  access: 'organisation',
  params: orgParams,
  query: z.object({
    year: integer('Year of the statistics'),
    month: integer('Month 1–12; without year/month the current month'),
  }),
  status: 200,
  response: shape.ok.extend({ usage: shape.usage }),
  errors: ['invalid_request', 'not_found'],
});

export const createDataset = operation({
  id: 'createDataset',
  method: 'POST',
  path: '/orgs/:organisation/datasets',
  summary: 'Create a dataset',
  tag: 'datasets',
  access: 'organisation',
  params: orgParams,
  body: body.createDataset,
  status: 201,
  response: shape.ok.extend({
    dataset_url: z.string().meta({ format: 'uri' }),
    dataset: shape.dataset,
  }),
  errors: ['invalid_request', 'not_found', 'conflict'],
});

export const listDatasets = operation({
  id: 'listDatasets',
  method: 'GET',
  path: '/orgs/:organisation/datasets',
  summary: 'The organisation’s datasets with their processing counts',
  tag: 'datasets',
  access: 'organisation',
  params: orgParams,
  status: 200,
  response: shape.ok.extend({ datasets: z.array(shape.dataset) }),
  errors: ['not_found'],
});

export const getDataset = operation({
  id: 'getDataset',
  method: 'GET',
  path: DS,
  summary: 'A dataset with its processing counts',
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  status: 200,
  response: shape.ok.extend({ dataset: shape.dataset }),
  errors: ['not_found'],
});

export const deleteDataset = operation({
  id: 'deleteDataset',
  method: 'DELETE',
  path: DS,
  summary: 'Delete a dataset and its items',
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  status: 200,
  response: shape.ok,
  errors: ['not_found'],
});

export const rotateBrowseToken = operation({
  id: 'rotateBrowseToken',
  method: 'POST',
  path: `${DS}/browse_token`,
  summary: 'Replace the dataset’s browse token (the old one stops working)',
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  status: 200,
  response: shape.ok.extend({ dataset: shape.dataset }),
  errors: ['not_found'],
});

export const getScopedKey = operation({
  id: 'getScopedKey',
  method: 'GET',
  path: `${DS}/scoped-key`,
  summary: 'The key scoped tokens are signed with (contract §16); it changes with the browse token',
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  status: 200,
  response: shape.ok.extend({ key: z.string().meta({ description: 'sk_…' }) }),
  errors: ['not_found'],
});

export const createScopedToken = operation({
  id: 'createScopedToken',
  method: 'POST',
  path: `${DS}/scoped-tokens`,
  summary: 'Sign a scoped token here instead of with the scoped key (contract §16)',
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  body: body.scopedToken,
  status: 201,
  response: shape.ok.extend({ token: z.string().meta({ description: 'st_…' }) }),
  errors: ['invalid_request', 'not_found'],
});

export const setEnabledFields = operation({
  id: 'setEnabledFields',
  method: 'PUT',
  path: `${DS}/settings/fields`,
  summary: 'Enable array metadata fields for q (interface §1)',
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  body: body.enabledFields,
  status: 200,
  response: shape.ok.extend({ dataset: shape.dataset }),
  errors: ['invalid_request', 'not_found'],
});

export const setSimilarity = operation({
  id: 'setSimilarity',
  method: 'PUT',
  path: `${DS}/settings/similarity`,
  summary: "Tune similarity to a field of the catalogue's own labels (contract §20)",
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  body: body.similaritySettings,
  status: 200,
  response: shape.ok.extend({ dataset: shape.dataset }),
  errors: ['invalid_request', 'not_found'],
});

export const analytics = operation({
  id: 'analytics',
  method: 'GET',
  path: `${DS}/analytics`,
  summary: 'The analytics report of requests and events (contract §11)',
  tag: 'datasets',
  access: 'organisation',
  params: datasetParams,
  query: z.object({
    from: text('Start, ISO 8601 (default: 30 days before to)'),
    to: text('End, ISO 8601 (default: now)'),
    interval: text('hour, day, week or month'),
    top: text('How many entries the top lists hold'),
  }),
  status: 200,
  response: shape.ok.extend({ analytics: shape.report }),
  errors: ['invalid_request', 'not_found'],
});
