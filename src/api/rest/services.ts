import type { AuthService } from '../../services/auth';
import type { ContentService } from '../../services/content';
import type { DatasetService } from '../../services/datasets';
import type { OrganisationService } from '../../services/organisations';
import type { ReadinessService } from '../../services/readiness';
import type { ReportService } from '../../services/report';
import type { SimilarityService } from '../../services/similarity';
import type { TrackService } from '../../services/track';
import type { UsageService } from '../../services/usage';
import type { VisionService } from '../../services/vision';
import type { Metrics } from '../../observability/metrics';

/** What the REST transport calls: services only, never a port or the composition root. */
export interface RestServices {
  auth: Pick<AuthService, 'authenticate' | 'requireOperator'>;
  organisations: OrganisationService;
  datasets: DatasetService;
  content: ContentService;
  vision: VisionService;
  similarity: SimilarityService;
  track: TrackService;
  report: ReportService;
  usage: UsageService;
  readiness: ReadinessService;
  metrics: Metrics;
}

/** What a worker-only process serves over HTTP: health and metrics. */
export type OpsServices = Pick<RestServices, 'auth' | 'readiness' | 'metrics'>;
