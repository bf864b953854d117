import { similarityBody } from '../../domain/tuning/settings';
import type { ProcessingErrorRecord } from '../../domain/item';
import { keyed } from '../../domain/keyed';
import type { DatasetView } from '../../services/datasets';
import type { OrganisationView, TokenView } from '../../services/organisations';
import type { UsageView } from '../../services/usage';
import { datasetLinks } from '../links';

// Account views as the interface writes them (snake_case; links from the request's base URL).

export function datasetBody(baseUrl: string, v: DatasetView): Record<string, unknown> {
  const links = datasetLinks(baseUrl, v.org, v.name);
  return {
    name: v.name,
    browse_token: v.browseToken,
    content_url: links.content,
    processing_errors_url: links.processingErrors,
    // contract §3's shape until tuned similarity is first set (§20)
    settings:
      v.similarity.revision > 0
        ? { ...v.settings, similarity: similarityBody(v.similarity) }
        : v.settings,
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

/** An organisation as create and setPlan answer it: no creation time (contract §3). */
export const planBody = (o: OrganisationView) => ({ name: o.name, plan: o.plan });

export const tokenBody = (t: TokenView) => ({ prefix: t.prefix, created_at: t.createdAt });

export const processingErrorBody = (e: ProcessingErrorRecord) => ({
  id: e.id,
  url: e.url,
  code: e.code,
  message: e.message,
  attempts: e.attempts,
  occurred_at: e.occurredAt,
});

/** The nested `usage` object of interface.md §3: datasets keyed by name. */
export function usageBody(u: UsageView) {
  // keyed by dataset names, which may be `__proto__` or `constructor`
  const datasets = keyed<Omit<UsageView['datasets'][number], 'name'>>();
  for (const { name, ...d } of u.datasets) datasets[name] = d;
  return { ...u, datasets };
}
