import type { Report, ReportSpec, RequestFacts } from '../domain/report';

/**
 * A user-visible happening in a dataset: a billable Vision API request (with its `v` action
 * variables) or a tracked behaviour event. The analytics report is computed from these.
 */
export interface LoggedEvent {
  org: string;
  datasetId: string;
  kind: 'request' | 'track';
  /** The request type (search, similar, …) or the tracked action. */
  type: string;
  /** Epoch ms. */
  at: number;
  vars?: Record<string, string>;
  /** Requests: what they found, filtered and sorted on, and showed (for the report). */
  facts?: RequestFacts;
}

/** The dataset's event log: append-only, shared by every process of the installation. */
export interface EventLog {
  /** Durable once resolved. */
  append(events: LoggedEvent[]): Promise<void>;
  /**
   * Events of a dataset with `from <= at < to`, oldest first (ties in append order), at most
   * `limit`. Appends become visible within about a second.
   */
  list(
    datasetId: string,
    range: { from: number; to: number },
    limit: number,
  ): Promise<LoggedEvent[]>;
  /**
   * The analytics report of a dataset (contract §11), aggregated by the engine that holds the
   * log: memory does not grow with the number of events.
   */
  report(datasetId: string, spec: ReportSpec): Promise<Report>;
}
