import crypto from 'node:crypto';
import {
  RESERVATION_TTL_MS,
  type Admission,
  type ChargeReceipt,
  type ImageCount,
  type ImageKey,
  type MonthUsage,
  type RequestCharge,
  type UsageLedger,
} from '../../ports/usage-ledger';
import { casUpdate } from './cas';
import { GroupCommit } from '../group-commit';
import { EsCreditCounter } from './es-credit-counter';
import type { BulkLane } from './bulk-lane';
import { unavailable } from './outage';
import type { EsIndices } from './indices';

/** Image counts written together at most (a few hundred bytes each). */
const IMAGE_GROUP = 500;

/** Versioned-write rounds for the image holds document before a 503. */
const HOLD_ATTEMPTS = 24;

interface HoldsDoc {
  org: string;
  year: number;
  /** Reservation id → when it was taken. */
  holds: Record<string, number>;
}

interface ImageDoc {
  org: string;
  year: number;
  dataset_id: string;
  item_id: string;
  url: string;
  at: number;
  /** The reservation (see holdId) this count fulfilled. */
  hold: string;
}

const hash = (...parts: Array<string | number>): string =>
  crypto.createHash('sha256').update(parts.join('\u0000')).digest('hex').slice(0, 40);

/**
 * The usage ledger in Elasticsearch, exact across any number of processes (contract §8, §12).
 *
 * Credits: a counter per organisation and month, with leases (EsCreditCounter).
 *
 * Images: one create-only document per counted processing (so redelivery never counts twice);
 * places in a fixed allowance are held in a per-organisation, per-year document that is
 * checked against the count of those documents in the same versioned write.
 */
export class EsUsageLedger implements UsageLedger {
  private readonly credits: EsCreditCounter;

  /** No linger of its own: the lane's keeps the counts of jobs finishing together in one request. */
  private readonly imageRecords = new GroupCommit(
    (batch: ImageCount[]) => this.recordImages(batch),
    IMAGE_GROUP,
  );

  constructor(
    private readonly indices: EsIndices,
    private readonly lane: BulkLane,
  ) {
    this.credits = new EsCreditCounter(indices);
  }

  private get client() {
    return this.indices.client;
  }

  charge(c: RequestCharge, limitMicro: number | undefined): Promise<ChargeReceipt | undefined> {
    return this.credits.charge(c, limitMicro);
  }

  admit(c: RequestCharge, limitMicro: number | undefined): Promise<Admission | undefined> {
    return this.credits.admit(c, limitMicro);
  }

  refund(receipt: ChargeReceipt): Promise<void> {
    return this.credits.refund(receipt);
  }

  month(org: string, year: number, month: number): Promise<MonthUsage> {
    return this.credits.month(org, year, month);
  }

  close(): Promise<void> {
    return this.credits.close();
  }

  private holdId(e: ImageKey): string {
    return hash(e.datasetId, e.itemId, e.url);
  }

  /**
   * Images counted for an organisation in a year, exactly (every counted one is made visible
   * first), and how many of `holds` are among them: a worker counts its image before it frees
   * its place, so for a moment a place and its count both exist, and must be counted once.
   */
  private async counted(
    org: string,
    year: number,
    holds: Record<string, number> = {},
  ): Promise<{ n: number; lastAt?: number; fulfilled: number }> {
    const index = this.indices.shared('images');
    await this.client.indices.refresh({ index });
    const held = Object.entries(holds);
    const r = await this.client.search({
      index,
      size: 0,
      track_total_hits: true,
      query: { bool: { filter: [{ term: { org } }, { term: { year } }] } },
      aggs: {
        last: { max: { field: 'at' } },
        ...(held.length
          ? {
              fulfilled: {
                filter: {
                  bool: {
                    // a count of this reservation, not of an earlier processing of the same url
                    should: held.map(([id, at]) => ({
                      bool: { filter: [{ term: { hold: id } }, { range: { at: { gte: at } } }] },
                    })),
                    minimum_should_match: 1,
                  },
                },
                aggs: { holds: { cardinality: { field: 'hold' } } },
              },
            }
          : {}),
      },
    });
    const aggs = r.aggregations as {
      last: { value: number | null };
      fulfilled?: { holds: { value: number } };
    };
    return {
      n: (r.hits.total as { value: number }).value,
      ...(aggs.last.value !== null ? { lastAt: aggs.last.value } : {}),
      fulfilled: aggs.fulfilled?.holds.value ?? 0,
    };
  }

  async reserveImage(
    e: ImageKey & { org: string; at: number },
    limit: number | undefined,
  ): Promise<boolean> {
    if (limit === undefined) return true;
    const year = new Date(e.at).getUTCFullYear();
    const id = this.holdId(e);
    let granted = false;
    // The count is taken between the read and the versioned write of the holds: a worker that
    // counts an image in between also changes the holds (it frees its place), so this write
    // conflicts and is redone; one that counted but has not freed its place yet is counted
    // once (`fulfilled`).
    await casUpdate<HoldsDoc>(
      this.client,
      this.indices.shared('image_holds'),
      `${e.org}:${year}`,
      async (cur) => {
        const holds = Object.fromEntries(
          Object.entries(cur?.holds ?? {}).filter(([, at]) => at > e.at - RESERVATION_TTL_MS),
        );
        if (id in holds) {
          granted = true;
          return undefined;
        }
        const { n, fulfilled } = await this.counted(e.org, year, holds);
        granted = n + Object.keys(holds).length - fulfilled < limit;
        return granted ? { org: e.org, year, holds: { ...holds, [id]: e.at } } : undefined;
      },
      // Every worker of the organisation writes here once per image, and each round reads the
      // count too: more contenders, slower rounds than any other versioned document.
      { what: 'the image allowance', attempts: HOLD_ATTEMPTS },
    );
    return granted;
  }

  async releaseImage(e: ImageKey & { org: string; at: number }): Promise<void> {
    return this.release([e], e.org, new Date(e.at).getUTCFullYear());
  }

  /** Frees the places these images held in the organisation's year (no write if none did). */
  private async release(images: ImageKey[], org: string, year: number): Promise<void> {
    const ids = images.map((e) => this.holdId(e));
    await casUpdate<HoldsDoc>(
      this.client,
      this.indices.shared('image_holds'),
      `${org}:${year}`,
      (cur) => {
        if (!cur || !ids.some((id) => id in cur.holds)) return undefined;
        const holds = { ...cur.holds };
        for (const id of ids) delete holds[id];
        return { ...cur, holds };
      },
      { what: 'the image allowance' },
    );
  }

  async recordImage(e: ImageCount): Promise<void> {
    return this.imageRecords.submit(e);
  }

  /**
   * The counts finished together (GroupCommit): one `_bulk` of create-only documents (one that
   * exists already is a redelivery, counted once), then each organisation's held places freed
   * in one versioned write, instead of a create and a holds read per image.
   */
  private async recordImages(batch: ImageCount[]): Promise<void[]> {
    const index = this.indices.shared('images');
    const items = await this.lane.submit(
      batch.map((e) => [
        { create: { _index: index, _id: hash(e.datasetId, e.itemId, e.url, e.processedAt) } },
        {
          org: e.org,
          year: new Date(e.at).getUTCFullYear(),
          dataset_id: e.datasetId,
          item_id: e.itemId,
          url: e.url,
          at: e.at,
          hold: this.holdId(e),
        } satisfies ImageDoc,
      ]),
    );
    const failed = items.find((i) => i.error && i.status !== 409);
    if (failed)
      throw unavailable(`an image count was not written (${failed.status}); try again`, 1);
    const byHolds = new Map<string, ImageCount[]>();
    // An image counted on an unlimited plan held no place: no holds document to read for it.
    for (const e of batch.filter((x) => x.held !== false)) {
      const key = `${e.org}:${new Date(e.at).getUTCFullYear()}`;
      byHolds.set(key, [...(byHolds.get(key) ?? []), e]);
    }
    await Promise.all(
      [...byHolds.values()].map((es) =>
        this.release(es, es[0]!.org, new Date(es[0]!.at).getUTCFullYear()),
      ),
    );
    return batch.map(() => undefined);
  }

  async images(org: string, year: number): Promise<{ processed: number; lastAt?: number }> {
    const { n, lastAt } = await this.counted(org, year);
    return { processed: n, ...(lastAt !== undefined ? { lastAt } : {}) };
  }
}
