import { z } from 'zod';
import { parseContentBatch } from '../../../domain/content';
import { operation } from '../operation';
import * as body from './bodies';
import { datasetParams, paging } from './params';
import * as shape from './shapes';

// Content writes and listings: the admin API (interface §4–§6, contract §4).

const DS = '/orgs/:organisation/datasets/:dataset';

const write = (method: 'POST' | 'PUT') =>
  operation({
    id: method === 'POST' ? 'addContent' : 'updateContent',
    method,
    path: `${DS}/content`,
    summary:
      method === 'POST'
        ? 'Add or replace content (interface §4); processed asynchronously'
        : 'Partially update content (interface §5); metadata keys merge',
    tag: 'content',
    access: 'organisation',
    params: datasetParams,
    body: body.contentBatch(method === 'POST' ? 'post' : 'put'),
    dataKeys: { bodyRule: (b) => parseContentBatch(b, method === 'POST' ? 'post' : 'put') },
    status: 202,
    response: shape.accepted,
    errors: ['invalid_request', 'not_found', 'payload_too_large'],
  });

export const addContent = write('POST');
export const updateContent = write('PUT');

export const deleteContent = operation({
  id: 'deleteContent',
  method: 'DELETE',
  path: `${DS}/content`,
  summary: 'Delete items by id',
  tag: 'content',
  access: 'organisation',
  params: datasetParams,
  body: body.deleteContent,
  status: 202,
  response: shape.accepted,
  errors: ['invalid_request', 'not_found'],
});

export const listContent = operation({
  id: 'listContent',
  method: 'GET',
  path: `${DS}/content`,
  summary: 'List content by id (interface §6)',
  tag: 'content',
  access: 'organisation',
  params: datasetParams,
  query: z.object(paging),
  status: 200,
  response: shape.ok.extend({ content: z.array(shape.listEntry) }),
  errors: ['invalid_request', 'not_found'],
});

export const processingErrors = operation({
  id: 'processingErrors',
  method: 'GET',
  path: `${DS}/errors`,
  summary: 'Outstanding processing errors with their codes',
  tag: 'content',
  access: 'organisation',
  params: datasetParams,
  query: z.object(paging),
  status: 200,
  response: shape.ok.extend({
    errors: z.array(shape.processingError),
    total_results: z.number().int().min(0),
  }),
  errors: ['invalid_request', 'not_found'],
});
