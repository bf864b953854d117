import {
  Arg,
  Ctx,
  Field,
  FieldResolver,
  InputType,
  Int,
  Mutation,
  Resolver,
  Root,
} from 'type-graphql';
import type { GqlContext } from '../context';
import { toAnalyticsReport } from '../report-map';
import { Dataset } from '../types/dataset';
import { CalendarInterval } from '../types/enums';
import { AnalyticsReport } from '../types/report';

@InputType({ description: 'A behaviour event (contract §11): `v` names the action with `a:`.' })
export class TrackEventInput {
  @Field(() => String, { description: 'e.g. "a:click,id:sku-1,page_view_id:…"' })
  v!: string;

  @Field(() => String, { nullable: true, description: 'ISO 8601 or epoch ms; default now.' })
  timestamp?: string;
}

/** The dataset's event log: tracked events in, the analytics report out. */
@Resolver(() => Dataset)
export class EventLogResolver {
  @FieldResolver(() => AnalyticsReport, {
    description:
      'Requests, events, zero-result searches, most used filters and sorts, most clicked ids and click-through per interval (contract §11). Free.',
  })
  async analytics(
    @Root() d: Dataset,
    @Ctx() ctx: GqlContext,
    @Arg('from', () => String, { nullable: true, description: 'Default: 30 days before `to`.' })
    from?: string,
    @Arg('to', () => String, { nullable: true, description: 'Exclusive; default now.' })
    to?: string,
    @Arg('interval', () => CalendarInterval, { defaultValue: CalendarInterval.DAY })
    interval?: CalendarInterval,
    @Arg('top', () => Int, { nullable: true, description: 'Entries per "most used" list.' })
    top?: number,
  ): Promise<AnalyticsReport> {
    const r = await ctx.services.report.report(await ctx.principal(), d.org, d.name, {
      ...(from != null ? { from } : {}),
      ...(to != null ? { to } : {}),
      ...(interval ? { interval } : {}),
      ...(top != null ? { top } : {}),
    });
    return toAnalyticsReport(r);
  }

  @Mutation(() => Int, {
    description:
      "Records behaviour events in the dataset's event log (dataset token; never billed). Returns how many were recorded: all or, on a bad event, none.",
  })
  async track(
    @Arg('organisation', () => String) organisation: string,
    @Arg('dataset', () => String) dataset: string,
    @Arg('events', () => [TrackEventInput]) events: TrackEventInput[],
    @Ctx() ctx: GqlContext,
  ): Promise<number> {
    const r = await ctx.services.track.track(await ctx.principal(), organisation, dataset, {
      events,
    });
    return r.accepted;
  }
}
