import type { Webhook, WebhookEventType } from '../domain/webhook';
import type { WebhookStore } from '../ports/webhook-store';

/** How long a process routes events by the webhooks it last read. */
const DIRECTORY_TTL_MS = 1000;

/**
 * The installation's webhooks as this process read them in the last second: workers ask it,
 * for every finished item, whether anyone wants to hear of it, so that ingestion with no
 * webhook pays nothing and a webhook registered on any host is followed within a second.
 */
export class WebhookDirectory {
  private read?: { at: number; hooks: Promise<Webhook[]> };

  constructor(
    private readonly store: WebhookStore,
    private readonly now: () => number,
  ) {}

  private hooks(): Promise<Webhook[]> {
    const at = this.now();
    if (!this.read || at - this.read.at >= DIRECTORY_TTL_MS) {
      const hooks = this.store.all();
      // a failed read is not kept: the next caller reads again
      hooks.catch(() => {
        if (this.read?.hooks === hooks) this.read = undefined;
      });
      this.read = { at, hooks };
    }
    return this.read.hooks;
  }

  /** Active webhooks of `org` that want `type` for `datasetId` (undefined: an org-wide event). */
  async wanting(org: string, type: WebhookEventType, datasetId?: string): Promise<Webhook[]> {
    return (await this.hooks()).filter(
      (w) =>
        w.org === org &&
        w.state === 'active' &&
        w.events.includes(type) &&
        (datasetId === undefined || !w.datasetIds || w.datasetIds.includes(datasetId)),
    );
  }

  /** Whether any active webhook of `org` wants any of `types` for `datasetId`. */
  async wantsAny(
    org: string,
    types: readonly WebhookEventType[],
    datasetId: string,
  ): Promise<boolean> {
    for (const t of types) if ((await this.wanting(org, t, datasetId)).length) return true;
    return false;
  }

  async active(): Promise<Webhook[]> {
    return (await this.hooks()).filter((w) => w.state === 'active');
  }

  /** Forgets the last read: the next question reads the store (after a local change). */
  invalidate(): void {
    this.read = undefined;
  }
}
