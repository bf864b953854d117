import type { Metrics } from '../observability/metrics';
import type { AuthService } from './auth';
import type { ContentService } from './content';
import type { DatasetEventsService } from './dataset-events';
import type { DatasetService } from './datasets';
import type { DuplicateService } from './duplicates';
import type { MeteringService } from './metering';
import type { OrganisationService } from './organisations';
import type { ReadinessService } from './readiness';
import type { ReportService } from './report';
import type { SimilarityService } from './similarity';
import type { TrackService } from './track';
import type { UsageService } from './usage';
import type { VisionService } from './vision';
import type { WebhookService } from './webhooks';

/** Every use case of one process; a transport declares the part it uses (a Pick of this). */
export interface ServiceSet {
  auth: AuthService;
  organisations: OrganisationService;
  datasets: DatasetService;
  datasetEvents: DatasetEventsService;
  content: ContentService;
  vision: VisionService;
  similarity: SimilarityService;
  track: TrackService;
  report: ReportService;
  duplicates: DuplicateService;
  usage: UsageService;
  metering: MeteringService;
  readiness: ReadinessService;
  metrics: Metrics;
  webhooks: WebhookService;
}
