import { Arg, Ctx, FieldResolver, Int, Mutation, Resolver, Root } from 'type-graphql';
import type { DeliveryView, WebhookView } from '../../../services/webhooks';
import type { GqlContext } from '../context';
import { Organisation } from '../types/account';
import {
  Webhook,
  WebhookCreation,
  WebhookDelivery,
  WebhookDeliveryState,
  WebhookEventType,
  WebhookInput,
  WebhookState,
} from '../types/webhook';

const toWebhook = (org: string, w: WebhookView): Webhook => ({
  id: w.id,
  org,
  url: w.url,
  events: w.events as WebhookEventType[],
  datasets: w.datasets,
  state: w.state as WebhookState,
  ...(w.disabledReason ? { disabledReason: w.disabledReason } : {}),
  createdAt: w.createdAt.toISOString(),
});

const toDelivery = (d: DeliveryView): WebhookDelivery => ({
  id: d.id,
  type: d.type as WebhookEventType,
  state: d.state as WebhookDeliveryState,
  attempts: d.attempts,
  lastStatus: d.lastStatus,
  ...(d.lastError ? { lastError: d.lastError } : {}),
  nextAttemptAt: d.nextAttemptAt?.toISOString() ?? null,
  createdAt: d.createdAt.toISOString(),
});

/** Webhook management (contract §17): the REST routes' twins, for organisation tokens. */
@Resolver(() => Organisation)
export class OrganisationWebhookFields {
  @FieldResolver(() => [Webhook])
  async webhooks(@Root() o: Organisation, @Ctx() ctx: GqlContext): Promise<Webhook[]> {
    const list = await ctx.services.webhooks.list(await ctx.principal(), o.name);
    return list.map((w) => toWebhook(o.name, w));
  }

  @FieldResolver(() => Webhook)
  async webhook(
    @Root() o: Organisation,
    @Arg('id', () => String) id: string,
    @Ctx() ctx: GqlContext,
  ): Promise<Webhook> {
    return toWebhook(o.name, await ctx.services.webhooks.get(await ctx.principal(), o.name, id));
  }
}

@Resolver(() => Webhook)
export class WebhookResolver {
  @FieldResolver(() => [WebhookDelivery], { description: 'Newest first.' })
  async deliveries(
    @Root() w: Webhook,
    @Arg('limit', () => Int, { nullable: true, description: 'At most 1000 (the default).' })
    limit: number | null | undefined,
    @Ctx() ctx: GqlContext,
  ): Promise<WebhookDelivery[]> {
    const list = await ctx.services.webhooks.deliveries(
      await ctx.principal(),
      w.org,
      w.id,
      limit ?? undefined,
    );
    return list.map(toDelivery);
  }

  @Mutation(() => WebhookCreation, {
    description: 'Register a webhook; the secret is shown this once. Organisation token.',
  })
  async createWebhook(
    @Arg('organisation', () => String) organisation: string,
    @Arg('input', () => WebhookInput) input: WebhookInput,
    @Ctx() ctx: GqlContext,
  ): Promise<WebhookCreation> {
    const made = await ctx.services.webhooks.create(await ctx.principal(), organisation, {
      url: input.url,
      events: input.events,
      ...(input.datasets ? { datasets: input.datasets } : {}),
    });
    return { webhook: toWebhook(organisation, made.webhook), secret: made.secret };
  }

  @Mutation(() => Boolean, { description: 'Delete a webhook and its deliveries.' })
  async deleteWebhook(
    @Arg('organisation', () => String) organisation: string,
    @Arg('id', () => String) id: string,
    @Ctx() ctx: GqlContext,
  ): Promise<boolean> {
    await ctx.services.webhooks.delete(await ctx.principal(), organisation, id);
    return true;
  }

  @Mutation(() => Boolean, { description: 'Attempt a delivery again now.' })
  async retryWebhookDelivery(
    @Arg('organisation', () => String) organisation: string,
    @Arg('webhook', () => String) webhook: string,
    @Arg('delivery', () => String) delivery: string,
    @Ctx() ctx: GqlContext,
  ): Promise<boolean> {
    await ctx.services.webhooks.retry(await ctx.principal(), organisation, webhook, delivery);
    return true;
  }
}
