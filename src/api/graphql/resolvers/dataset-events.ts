import { Arg, Resolver, Root, Subscription } from 'type-graphql';
import type { DatasetEventView } from '../../../services/dataset-events';
import type { GqlContext } from '../context';
import { DatasetStatus } from '../types/enums';
import { DatasetCounts } from '../types/dataset';
import { DatasetEvent, DatasetEventType } from '../types/dataset-events';

interface DatasetEventsArgs {
  organisation: string;
  dataset: string;
}

@Resolver()
export class DatasetEventsResolver {
  @Subscription(() => DatasetEvent, {
    description:
      'Live progress of a dataset over the graphql-transport-ws protocol at /graphql: processed and failed items as workers finish them, and the moment it is published. Organisation token, given in the connection_init payload as `{ "authorization": "token …" }`.',
    subscribe: async ({ args, context }) => {
      const ctx = context as GqlContext;
      const { organisation, dataset } = args as DatasetEventsArgs;
      return ctx.services.datasetEvents.stream(await ctx.principal(), organisation, dataset);
    },
  })
  datasetEvents(
    @Arg('organisation', () => String) _organisation: string,
    @Arg('dataset', () => String) _dataset: string,
    @Root() e: DatasetEventView,
  ): DatasetEvent {
    return Object.assign(new DatasetEvent(), {
      type: e.type as DatasetEventType,
      itemIds: e.itemIds,
      counts: Object.assign(new DatasetCounts(), e.counts),
      status: e.status as DatasetStatus,
    });
  }
}
