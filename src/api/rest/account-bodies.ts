import type { ProcessingErrorRecord } from '../../domain/item';
import { datasetLinks, type DatasetView } from '../../services/datasets';
import type { OrganisationView, TokenView } from '../../services/organisations';

// Account views as the interface writes them (snake_case; links from the request's base URL).

export function datasetBody(baseUrl: string, v: DatasetView): Record<string, unknown> {
  const links = datasetLinks(baseUrl, v.org, v.name);
  return {
    name: v.name,
    browse_token: v.browseToken,
    content_url: links.content,
    processing_errors_url: links.processingErrors,
    settings: v.settings,
    status: v.status,
    created_at: v.createdAt,
    counts: v.counts,
  };
}

export const organisationBody = (o: OrganisationView) => ({
  name: o.name,
  plan: o.plan,
  created_at: o.createdAt,
});

export const tokenBody = (t: TokenView) => ({ prefix: t.prefix, created_at: t.createdAt });

export const processingErrorBody = (e: ProcessingErrorRecord) => ({
  id: e.id,
  url: e.url,
  code: e.code,
  message: e.message,
  attempts: e.attempts,
  occurred_at: e.occurredAt,
});
