import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';

/** A dataset's counts and status, as GET dataset gives them (contract §3). */
export interface Progress {
  status: string;
  counts: { items: number; processed: number; pending: number; errors: number };
}

export interface ProgressFeedOptions {
  /** The service's ws:// URL of /graphql. */
  url: string;
  /** An organisation token (the subscription's connection_init). */
  token: string;
  organisation: string;
  dataset: string;
  /** GET dataset: the fallback, and the answer when the socket has been quiet for a while. */
  read: () => Promise<Progress>;
  /** How often to read while the socket is down. */
  pollMs: number;
}

const EVENTS = `subscription DemoProgress($o: String!, $d: String!) {
  datasetEvents(organisation: $o, dataset: $d) { status counts { items processed pending errors } }
}`;
/** How long to wait for the socket's acknowledgement before polling instead. */
const CONNECT_MS = 5000;
/**
 * With no event for this long, the dataset is read once: a subscription starts a moment after
 * it is sent, and an event in that moment (or lost on the bus) is not sent again.
 */
const QUIET_MS = 2000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * A dataset's progress from the `datasetEvents` subscription (contract §17), over graphql-ws
 * with `ws` (Node 20 has no WebSocket); polling GET dataset when the socket cannot connect or
 * drops. Counts are absolute, so only the newest event waiting matters.
 */
export class ProgressFeed {
  private state: 'connecting' | 'live' | 'down' = 'connecting';
  private latest?: Progress;
  private wake?: () => void;
  private ready: () => void = () => undefined;
  private readonly client: Client;

  private constructor(private readonly opts: ProgressFeedOptions) {
    this.client = createClient({
      url: opts.url,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `token ${opts.token}` },
      retryAttempts: 0,
      on: {
        connected: () => {
          if (this.state === 'connecting') this.state = 'live';
          this.ready();
        },
        closed: () => this.down(),
      },
    });
    this.client.subscribe<{ datasetEvents: Progress }>(
      { query: EVENTS, variables: { o: opts.organisation, d: opts.dataset } },
      {
        next: (r) => {
          const e = r.data?.datasetEvents;
          if (!e) return;
          this.latest = { counts: e.counts, status: e.status.toLowerCase() };
          this.wake?.();
        },
        error: () => this.down(),
        complete: () => this.down(),
      },
    );
  }

  /** Subscribes and waits for the socket (at most 5 s); a feed that could not connect polls. */
  static async open(opts: ProgressFeedOptions): Promise<ProgressFeed> {
    const feed = new ProgressFeed(opts);
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      feed.ready = resolve;
      timer = setTimeout(() => feed.down(), CONNECT_MS);
      if (feed.state !== 'connecting') resolve();
    });
    clearTimeout(timer);
    return feed;
  }

  /** The next progress: the newest event, or a read after a quiet while or while polling. */
  async next(): Promise<Progress> {
    if (!this.latest) {
      if (this.state !== 'live') {
        await sleep(this.opts.pollMs);
        return this.opts.read();
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, QUIET_MS);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
    const got = this.latest;
    this.latest = undefined;
    return got ?? this.opts.read();
  }

  close(): void {
    this.down();
  }

  /** The socket closed, the subscription ended or the socket did not connect: poll from now on. */
  private down(): void {
    if (this.state === 'down') return;
    this.state = 'down';
    // A socket refused before its acknowledgement rejects dispose too: nothing is left to close.
    void Promise.resolve(this.client.dispose()).catch(() => undefined);
    this.ready();
    this.wake?.();
  }
}
