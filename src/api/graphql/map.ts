import type { Plan as DomainPlan } from '../../domain/plan';
import type { DatasetView } from '../../services/datasets';
import { datasetLinks, exploreUrl, type Carry } from '../links';
import type { StoredItem } from '../../domain/item';
import { Plan, RequestCredit } from './types/account';
import { Dataset, type TuningState } from './types/dataset';
import type { DatasetStatus, LimitType, RequestType } from './types/enums';
import { VisionItem } from './types/vision';

// Service results → GraphQL objects. Shapes only; every rule stays in the services.

export const requestCredits = (rc: DomainPlan['requestCredits']): RequestCredit[] =>
  Object.entries(rc).map(([type, credits]) => ({ type: type as RequestType, credits }));

export function toPlan(p: DomainPlan): Plan {
  return {
    credits: { limitType: p.credits.limitType as LimitType, limit: p.credits.limit },
    images: { limitType: p.images.limitType as LimitType, limit: p.images.limit },
    requestCredits: requestCredits(p.requestCredits),
  };
}

export function toDataset(baseUrl: string, v: DatasetView): Dataset {
  const links = datasetLinks(baseUrl, v.org, v.name);
  return Object.assign(new Dataset(), {
    org: v.org,
    name: v.name,
    browseToken: v.browseToken,
    contentUrl: links.content,
    processingErrorsUrl: links.processingErrors,
    settings: {
      fields: Object.entries(v.settings.fields).map(([name, values]) => ({ name, values })),
      version: v.settings.version,
      similarity: {
        learnFrom: v.similarity.learnFrom,
        weight: v.similarity.weight,
        state: v.similarity.state as TuningState,
        reason: v.similarity.reason,
        fittedAt: v.similarity.fittedAt,
        labelledItems: v.similarity.labelledItems,
        classes: v.similarity.classes,
        cvPrecisionAt10: v.similarity.cv,
      },
    },
    status: v.status as DatasetStatus,
    createdAt: v.createdAt,
    counts: v.counts,
  });
}

export function toVisionItem(
  item: StoredItem,
  link: { baseUrl: string; org: string; dataset: string; carry: Carry },
  score?: number,
): VisionItem {
  return Object.assign(new VisionItem(), {
    item,
    organisation: link.org,
    dataset: link.dataset,
    id: item.id,
    exploreUrl: exploreUrl(link.baseUrl, link.org, link.dataset, item.id, link.carry),
    score,
    image: item.image,
    createdAt: new Date(item.createdAt).toISOString(),
    updatedAt: new Date(item.updatedAt).toISOString(),
    servicePopularity: item.counts?.popularity ?? 0,
    servicePurchases: item.counts?.purchases ?? 0,
  });
}
