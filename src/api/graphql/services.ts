import type { Metrics } from '../../observability/metrics';
import type { AuthService } from '../../services/auth';
import type { ContentService } from '../../services/content';
import type { DatasetService } from '../../services/datasets';
import type { OrganisationService } from '../../services/organisations';
import type { ReportService } from '../../services/report';
import type { SimilarityService } from '../../services/similarity';
import type { TrackService } from '../../services/track';
import type { UsageService } from '../../services/usage';
import type { VisionService } from '../../services/vision';

/** What the GraphQL transport calls: services only, never a port or the composition root. */
export interface GraphqlServices {
  auth: Pick<AuthService, 'authenticate' | 'describe'>;
  organisations: OrganisationService;
  datasets: DatasetService;
  content: ContentService;
  vision: VisionService;
  similarity: SimilarityService;
  track: TrackService;
  report: ReportService;
  usage: UsageService;
  metrics: Metrics;
}
