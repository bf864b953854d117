import { invalid, type ErrorDetail } from './errors';
import { LIMITS } from './limits';
import { WEBHOOK_EVENTS, type WebhookEventType } from './webhook';

/** A registration as a transport parsed it. */
export interface WebhookInput {
  url: string;
  events: readonly string[];
  /** Dataset names; undefined = every dataset of the organisation. */
  datasets?: readonly string[];
}

/**
 * The rules of a registration that need no store (contract §17): an absolute http(s) URL with
 * no credentials in it (the signature is what authenticates a delivery), a non-empty set of
 * known events, and a bounded list of dataset names. Every problem is named at once.
 */
export function checkWebhookInput(input: WebhookInput): {
  url: string;
  events: WebhookEventType[];
  datasets?: string[];
} {
  const details: ErrorDetail[] = [];
  let url: URL | undefined;
  if (input.url.length > LIMITS.webhookUrlLength)
    details.push({ field: 'url', message: `at most ${LIMITS.webhookUrlLength} characters` });
  else {
    try {
      url = new URL(input.url);
    } catch {
      details.push({ field: 'url', message: 'not an absolute URL' });
    }
  }
  if (url && url.protocol !== 'https:' && url.protocol !== 'http:')
    details.push({ field: 'url', message: 'only http and https URLs can receive webhooks' });
  if (url && (url.username || url.password))
    details.push({
      field: 'url',
      message: 'a URL with credentials is refused: deliveries are authenticated by their signature',
    });
  const known = new Set<string>(WEBHOOK_EVENTS);
  if (!input.events.length)
    details.push({ field: 'events', message: `name at least one of ${WEBHOOK_EVENTS.join(', ')}` });
  input.events.forEach((e, i) => {
    if (!known.has(e))
      details.push({
        field: `events[${i}]`,
        value: e,
        message: `unknown event; expected one of ${WEBHOOK_EVENTS.join(', ')}`,
      });
  });
  const datasets = input.datasets && [...new Set(input.datasets)];
  if (datasets && !datasets.length)
    details.push({ field: 'datasets', message: 'leave it out to follow every dataset' });
  if (datasets && datasets.length > LIMITS.webhookDatasets)
    details.push({ field: 'datasets', message: `at most ${LIMITS.webhookDatasets} datasets` });
  if (details.length) throw invalid('the webhook cannot be registered', details);
  const events = WEBHOOK_EVENTS.filter((e) => input.events.includes(e));
  return { url: url!.toString(), events, ...(datasets ? { datasets } : {}) };
}
