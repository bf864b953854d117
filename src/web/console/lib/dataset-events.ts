import { createClient } from 'graphql-ws/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Dataset } from '../api';
import {
  ConsoleDatasetEventsDocument,
  type ConsoleDatasetEventsSubscription,
} from '../graphql/generated';

/** What an event changes of a dataset: its counts and status after the event. */
export type DatasetProgress = Pick<Dataset, 'counts' | 'status'>;

/**
 * `connecting` until the sockets are acknowledged, `live` while they are, `down` after one failed
 * or closed abnormally (the caller polls quickly then; the client keeps trying to reconnect).
 */
export type LiveState = 'connecting' | 'live' | 'down';

/** The server closes a socket whose token is refused with this code: retrying cannot help. */
const FORBIDDEN = 4403;
const MAX_RETRY_WAIT_MS = 30_000;
/** A socket that is not acknowledged by then counts as failed (its close is then seen). */
const ACK_TIMEOUT_MS = 10_000;
/** The service allows 10 subscriptions per connection. */
const PER_SOCKET = 10;

const isClose = (e: unknown): e is { code: number } =>
  typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'number';

/**
 * Live progress of the named datasets (contract §17 `datasetEvents`) over WebSockets to the
 * origin's /graphql (one per 10 datasets), authenticated by the organisation token in `connection_init`. `onEvent`
 * gets each event's counts and status; the sockets are opened again when the names change.
 */
export function useDatasetEvents(
  token: string,
  org: string,
  names: string[],
  onEvent: (name: string, progress: DatasetProgress) => void,
): LiveState {
  const [state, setState] = useState<LiveState>('connecting');
  const latest = useRef(onEvent);
  latest.current = onEvent;
  const key = [...names].sort().join('\n');

  useEffect(() => {
    const shown = key ? key.split('\n') : [];
    if (!shown.length) return;
    let disposed = false;
    // One socket per PER_SOCKET datasets; together they are down if any is, live if all are.
    const states: LiveState[] = [];
    const set = (i: number, s: LiveState) => {
      if (disposed) return;
      states[i] = s;
      setState(
        states.includes('down')
          ? 'down'
          : states.every((x) => x === 'live')
            ? 'live'
            : 'connecting',
      );
    };
    const stops: Array<() => void> = [];
    for (let i = 0; i * PER_SOCKET < shown.length; i++) {
      states.push('connecting');
      stops.push(
        follow(token, org, shown.slice(i * PER_SOCKET, (i + 1) * PER_SOCKET), {
          state: (s) => set(i, s),
          event: (name, p) => void (disposed || latest.current(name, p)),
        }),
      );
    }
    return () => {
      disposed = true;
      for (const stop of stops) stop();
    };
  }, [token, org, key]);

  return state;
}

/** One socket following `names`; returns what closes it. */
function follow(
  token: string,
  org: string,
  names: string[],
  on: { state: (s: LiveState) => void; event: (name: string, p: DatasetProgress) => void },
): () => void {
  const client = createClient({
    url: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`,
    connectionParams: { authorization: `token ${token}` },
    connectionAckWaitTimeout: ACK_TIMEOUT_MS,
    // Keep trying while the page is open (polling covers the gap), but at most every 30 s.
    retryAttempts: Infinity,
    retryWait: (n) =>
      new Promise((r) =>
        setTimeout(r, Math.min(MAX_RETRY_WAIT_MS, 1000 * 2 ** n) + Math.random() * 1000),
      ),
    shouldRetry: (e) => isClose(e) && e.code !== FORBIDDEN,
    on: {
      connected: () => on.state('live'),
      closed: (e) => {
        if (!(isClose(e) && e.code === 1000)) on.state('down');
      },
    },
  });
  const stops = names.map((dataset) =>
    client.subscribe<ConsoleDatasetEventsSubscription>(
      { query: ConsoleDatasetEventsDocument.toString(), variables: { organisation: org, dataset } },
      {
        next: (r) => {
          const e = r.data?.datasetEvents;
          if (e)
            on.event(dataset, {
              counts: e.counts,
              status: e.status === 'PUBLISHED' ? 'published' : 'pending',
            });
        },
        // A refused subscription or a socket given up on: polling takes over.
        error: () => on.state('down'),
        complete: () => undefined,
      },
    ),
  );
  return () => {
    for (const stop of stops) stop();
    // A socket refused before its acknowledgement rejects dispose too: nothing is left to close.
    void Promise.resolve(client.dispose()).catch(() => undefined);
  };
}
