// Absolute URLs the transports show (contract §3, §7): built from the request's base URL here,
// never in services, which know nothing of routes.

export const datasetPath = (org: string, name: string): string =>
  `/orgs/${encodeURIComponent(org)}/datasets/${encodeURIComponent(name)}`;

/** The links every transport shows with a dataset. */
export function datasetLinks(baseUrl: string, org: string, name: string) {
  const dataset = `${baseUrl}${datasetPath(org, name)}`;
  return { dataset, content: `${dataset}/content`, processingErrors: `${dataset}/errors` };
}

/** What a result's explore_url carries over from the request (contract §7). */
export interface Carry {
  fields?: string;
  q?: string;
  limit?: number;
  /** An explore journey's selections so far (the next step is steered by them). */
  path?: string[];
  /** A grouped request's group and group_size (contract §13): the journey stays grouped. */
  group?: string;
  groupSize?: number;
}

export function exploreUrl(
  baseUrl: string,
  org: string,
  dataset: string,
  id: string,
  carry: Carry,
): string {
  const params = new URLSearchParams({ id });
  if (carry.fields) params.set('fields', carry.fields);
  if (carry.q) params.set('q', carry.q);
  if (carry.limit !== undefined) params.set('limit', String(carry.limit));
  if (carry.path?.length) params.set('path', carry.path.map(encodeURIComponent).join(','));
  if (carry.group) params.set('group', carry.group);
  if (carry.group && carry.groupSize !== undefined)
    params.set('group_size', String(carry.groupSize));
  // URLSearchParams writes spaces as '+'; %20 reads the same everywhere.
  return `${baseUrl}${datasetPath(org, dataset)}/explore?${params.toString().replace(/\+/g, '%20')}`;
}
