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
 * `connecting` until the socket is acknowledged, `live` while it is, `down` after it failed or
 * closed abnormally (the caller polls quickly then; the client keeps trying to reconnect).
 */
export type LiveState = 'connecting' | 'live' | 'down';

/** The server closes a socket whose token is refused with this code: retrying cannot help. */
const FORBIDDEN = 4403;
const MAX_RETRY_WAIT_MS = 30_000;
/** A socket that is not acknowledged by then counts as failed (its close is then seen). */
const ACK_TIMEOUT_MS = 10_000;

const isClose = (e: unknown): e is { code: number } =>
  typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'number';

/**
 * Live progress of the named datasets (contract §17 `datasetEvents`) over one WebSocket to the
 * origin's /graphql, authenticated by the organisation token in `connection_init`. `onEvent`
 * gets each event's counts and status; the socket is opened again when the names change.
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
        connected: () => void (disposed || setState('live')),
        closed: (e) => {
          if (!disposed && !(isClose(e) && e.code === 1000)) setState('down');
        },
      },
    });
    const stops = shown.map((dataset) =>
      client.subscribe<ConsoleDatasetEventsSubscription>(
        {
          query: ConsoleDatasetEventsDocument.toString(),
          variables: { organisation: org, dataset },
        },
        {
          next: (r) => {
            const e = r.data?.datasetEvents;
            if (e && !disposed)
              latest.current(dataset, {
                counts: e.counts,
                status: e.status === 'PUBLISHED' ? 'published' : 'pending',
              });
          },
          // A refused subscription or a socket given up on: polling takes over.
          error: () => void (disposed || setState('down')),
          complete: () => undefined,
        },
      ),
    );
    return () => {
      disposed = true;
      for (const stop of stops) stop();
      // A socket refused before its acknowledgement rejects dispose too: nothing is left to close.
      void Promise.resolve(client.dispose()).catch(() => undefined);
    };
  }, [token, org, key]);

  return state;
}
