import { parseReportParams, type Report, type ReportParams } from '../domain/report';
import type { EventLog } from '../ports/event-log';
import type { AuthService } from './auth';
import type { Principal } from './principal';

/** The analytics report of a dataset (contract §11): organisation token, free. */
export class ReportService {
  constructor(
    private readonly auth: AuthService,
    private readonly events: EventLog,
    private readonly now: () => number,
  ) {}

  async report(p: Principal, org: string, name: string, params: ReportParams): Promise<Report> {
    const ds = await this.auth.adminDataset(p, org, name);
    return this.events.report(ds.id, parseReportParams(params, this.now()));
  }
}
