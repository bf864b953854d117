/** Something a process needs to reach before it can serve: answers, or throws. */
export interface Pingable {
  ping(): Promise<void>;
}

type CheckState = 'ok' | 'unavailable';

export interface Readiness {
  ready: boolean;
  checks: { accounts: CheckState; store: CheckState; queue: CheckState };
}

/** GET /readyz (contract §1): the account store, the content store and the queue answer. */
export class ReadinessService {
  constructor(private readonly deps: { accounts: Pingable; store: Pingable; queue: Pingable }) {}

  async check(): Promise<Readiness> {
    const { accounts, store, queue } = this.deps;
    const [a, s, q] = await Promise.all(
      [accounts, store, queue].map((p) =>
        p.ping().then(
          (): CheckState => 'ok',
          (): CheckState => 'unavailable',
        ),
      ),
    );
    return {
      ready: a === 'ok' && s === 'ok' && q === 'ok',
      checks: { accounts: a!, store: s!, queue: q! },
    };
  }
}
