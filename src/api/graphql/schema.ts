import 'reflect-metadata';
import { buildSubgraphSchema, printSubgraphSchema } from '@apollo/subgraph';
import type { GraphQLResolverMap } from '@apollo/subgraph/dist/schema-helper';
import { getDocumentNodeFromSchema } from '@graphql-tools/utils';
import {
  concatAST,
  isInputObjectType,
  isObjectType,
  lexicographicSortSchema,
  parse,
  type GraphQLSchema,
} from 'graphql';
import { buildSchema, createResolversMap } from 'type-graphql';
import type { GqlContext } from './context';
import { resolveVisionItemReference, type VisionItemReference } from './federation';
import { AccountResolver, OrganisationFields } from './resolvers/accounts';
import { ContentEntryFields, DatasetResolver } from './resolvers/datasets';
import { DatasetEventsResolver } from './resolvers/dataset-events';
import { DuplicateResolver } from './resolvers/duplicates';
import { EventLogResolver } from './resolvers/event-log';
import { SimilarityResolver } from './resolvers/similarity';
import { VisionItemFields, VisionResolver } from './resolvers/vision';
import { OrganisationWebhookFields, WebhookResolver } from './resolvers/webhooks';

let built: Promise<GraphQLSchema> | undefined;

/** Federation 2 (contract §19): the only federation directive the schema uses is `@key`. */
const LINK = parse(
  'extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])',
);

/**
 * The schema, built once from the decorated classes (code first), as an Apollo Federation 2
 * subgraph (contract §19): type-graphql's schema, as a document with its `@key` directive,
 * becomes a subgraph with `_service` and `_entities`, its resolvers carried over (type-graphql's
 * documented way, examples/apollo-federation-2). The document is sorted first, as the subgraph
 * printer keeps definition order.
 */
export function graphqlSchema(): Promise<GraphQLSchema> {
  built ??= buildCodeFirst().then((schema) => {
    const resolvers = createResolversMap(schema) as GraphQLResolverMap<unknown>;
    const subgraph = buildSubgraphSchema({
      typeDefs: concatAST([LINK, getDocumentNodeFromSchema(lexicographicSortSchema(schema))]),
      resolvers: {
        ...resolvers,
        VisionItem: {
          ...(resolvers.VisionItem as object),
          // (reference, context): the signature @apollo/subgraph calls it with
          __resolveReference: (ref: VisionItemReference, ctx: GqlContext) =>
            resolveVisionItemReference(ref, ctx),
        },
      },
    });
    keepDefaults(schema, subgraph);
    return subgraph;
  });
  return built;
}

/**
 * Default values come back from the SDL as enum names (`order = DESC`), read before the resolver
 * map gave the enums their values (`'desc'`): each argument and input field takes the default
 * type-graphql's schema has, a value as the resolvers expect it.
 */
function keepDefaults(from: GraphQLSchema, to: GraphQLSchema): void {
  for (const type of Object.values(to.getTypeMap())) {
    const source = from.getType(type.name);
    if (isObjectType(type) && isObjectType(source)) {
      const fields = source.getFields();
      for (const field of Object.values(type.getFields()))
        for (const arg of field.args) {
          const was = fields[field.name]?.args.find((a) => a.name === arg.name);
          if (was) arg.defaultValue = was.defaultValue;
        }
    } else if (isInputObjectType(type) && isInputObjectType(source)) {
      const fields = source.getFields();
      for (const field of Object.values(type.getFields()))
        if (fields[field.name]) field.defaultValue = fields[field.name].defaultValue;
    }
  }
}

const NO_PUBSUB = {
  publish(): never {
    throw new Error('no PubSub: subscriptions subscribe through their services');
  },
  subscribe(): never {
    throw new Error('no PubSub: subscriptions subscribe through their services');
  },
};

function buildCodeFirst(): Promise<GraphQLSchema> {
  return buildSchema({
    resolvers: [
      AccountResolver,
      OrganisationFields,
      DatasetResolver,
      DatasetEventsResolver,
      ContentEntryFields,
      EventLogResolver,
      DuplicateResolver,
      VisionResolver,
      SimilarityResolver,
      VisionItemFields,
      OrganisationWebhookFields,
      WebhookResolver,
    ],
    // Input rules live in the domain validators shared with REST, not in class-validator.
    validate: false,
    // Each subscription brings its own `subscribe`; type-graphql wants a PubSub all the same.
    pubSub: NO_PUBSUB,
  });
}

/**
 * The SDL committed as schema/schema.graphql (sorted, so diffs show real changes only): the
 * subgraph SDL a router composes (`@link`, `@key`); `_service { sdl }` answers the same subgraph
 * with the federation definitions written out.
 */
export async function schemaSdl(): Promise<string> {
  const header =
    '# Emitted from the code by `npm run schema:emit` (src/api/graphql). Do not edit by hand.\n\n';
  return header + printSubgraphSchema(await graphqlSchema()) + '\n';
}
