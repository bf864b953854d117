import type { DisabledReason, Webhook, WebhookState } from '../../domain/webhook';
import type { WebhookStore } from '../../ports/webhook-store';
import { KeyedGroupCommit } from '../group-commit';
import { casUpdate, getVersioned } from './cas';
import type { EsIndices } from './indices';
import { Refresher } from './refresher';

/** One organisation's webhooks; _id = org. */
interface OrgHooksDoc {
  org: string;
  hook_ids: string[];
  hooks: Webhook[];
}

/** Creates of one organisation waiting for its document's next write. */
interface Create {
  w: Webhook;
  maxPerOrg: number;
}

/**
 * Versioned-write rounds before a 503: creates of one organisation from one process share a
 * write (group commit), so conflicts come from other hosts only, yet a burst may meet several.
 */
const ATTEMPTS = 24;

/** Organisations one page of `all` reads. */
const PAGE = 1_000;

/**
 * The webhook registry on Elasticsearch, safe under any number of hosts.
 *
 * An organisation's webhooks (at most MAX_WEBHOOKS_PER_ORG, each small) live together in one
 * document, so the cap is checked and the webhook added in one versioned write: two hosts
 * creating at once cannot both take the last place, and no crash can leave a counter out of
 * step with the webhooks it counts (as a separate counter document, or a create-then-count-
 * then-delete, could: the latter also refuses both of two racers for the last place). Reads of
 * one organisation are realtime GETs, so a webhook is listed as soon as it is created.
 */
export class EsWebhookStore implements WebhookStore {
  private readonly refresher: Refresher;
  private readonly creates = new KeyedGroupCommit(
    (org: string, batch: Create[]) => this.applyCreates(org, batch),
    Infinity,
  );

  constructor(private readonly indices: EsIndices) {
    this.refresher = new Refresher(() => indices.client);
  }

  private get index(): string {
    return this.indices.shared('webhooks');
  }

  async create(w: Webhook, maxPerOrg: number): Promise<boolean> {
    return this.creates.submit(w.org, { w, maxPerOrg });
  }

  /** Adds what fits of one organisation's creates in one versioned write, in arrival order. */
  private async applyCreates(org: string, batch: Create[]): Promise<boolean[]> {
    let added: boolean[] = [];
    await casUpdate<OrgHooksDoc>(
      this.indices.client,
      this.index,
      org,
      (cur) => {
        const hooks = [...(cur?.hooks ?? [])];
        added = batch.map(({ w, maxPerOrg }) => {
          if (hooks.length >= maxPerOrg || hooks.some((h) => h.id === w.id)) return false;
          hooks.push(w);
          return true;
        });
        if (!added.some(Boolean)) return undefined;
        return { org, hook_ids: hooks.map((h) => h.id), hooks };
      },
      { what: "the organisation's webhooks", attempts: ATTEMPTS },
    );
    return added;
  }

  async list(org: string): Promise<Webhook[]> {
    const cur = await getVersioned<OrgHooksDoc>(this.indices.client, this.index, org);
    // stable: webhooks created in the same millisecond keep their order of creation
    return [...(cur?.doc.hooks ?? [])].sort((a, b) => a.createdAt - b.createdAt);
  }

  async get(org: string, id: string): Promise<Webhook | undefined> {
    return (await this.list(org)).find((h) => h.id === id);
  }

  async delete(org: string, id: string): Promise<boolean> {
    const r = await casUpdate<OrgHooksDoc>(
      this.indices.client,
      this.index,
      org,
      (cur) => {
        if (!cur?.hooks.some((h) => h.id === id)) return undefined;
        const hooks = cur.hooks.filter((h) => h.id !== id);
        return { org, hook_ids: hooks.map((h) => h.id), hooks };
      },
      { what: "the organisation's webhooks", attempts: ATTEMPTS },
    );
    return r.written;
  }

  async setState(id: string, state: WebhookState, reason?: DisabledReason): Promise<void> {
    const org = await this.orgOf(id);
    if (org === undefined) return;
    await casUpdate<OrgHooksDoc>(
      this.indices.client,
      this.index,
      org,
      (cur) => {
        // deleted meanwhile: it stays deleted
        if (!cur?.hooks.some((h) => h.id === id)) return undefined;
        const hooks = cur.hooks.map((h) => {
          if (h.id !== id) return h;
          const { disabledReason: _, ...rest } = h;
          return { ...rest, state, ...(reason ? { disabledReason: reason } : {}) };
        });
        return { ...cur, hooks };
      },
      { what: "the organisation's webhooks", attempts: ATTEMPTS },
    );
  }

  /** The organisation a webhook id belongs to, as searches see it once refreshed. */
  private async orgOf(id: string): Promise<string | undefined> {
    await this.refresher.visible(this.index);
    const r = await this.indices.client.search<OrgHooksDoc>({
      index: this.index,
      query: { term: { hook_ids: id } },
      size: 1,
      _source: ['org'],
    });
    return r.hits.hits[0]?._source?.org;
  }

  async all(): Promise<Webhook[]> {
    await this.refresher.visible(this.index);
    const out: Webhook[] = [];
    let after: unknown[] | undefined;
    for (;;) {
      const r = await this.indices.client.search<OrgHooksDoc>({
        index: this.index,
        size: PAGE,
        sort: [{ org: 'asc' }],
        ...(after ? { search_after: after as never } : {}),
      });
      for (const h of r.hits.hits) out.push(...(h._source?.hooks ?? []));
      if (r.hits.hits.length < PAGE) return out;
      after = r.hits.hits.at(-1)!.sort;
    }
  }
}
