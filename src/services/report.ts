import { parseReportParams, type EventReport, type ReportParams } from '../domain/event-report';
import type { EventLog } from '../ports/event-log';
import type { AuthService } from './auth';
import type { RequestContext } from './principal';

/** The analytics report of a dataset (contract §11): organisation token, free. */
export class ReportService {
  constructor(
    private readonly auth: AuthService,
    private readonly events: EventLog,
    private readonly now: () => number,
  ) {}

  async report(
    ctx: RequestContext,
    org: string,
    name: string,
    p: ReportParams,
  ): Promise<EventReport> {
    const ds = await this.auth.adminDataset(ctx.principal, org, name);
    return this.events.report(ds.id, parseReportParams(p, this.now()));
  }
}
