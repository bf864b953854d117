import 'reflect-metadata';
import { lexicographicSortSchema, printSchema, type GraphQLSchema } from 'graphql';
import { buildSchema } from 'type-graphql';
import { AccountResolver, OrganisationFields } from './resolvers/accounts';
import { ContentEntryFields, DatasetResolver } from './resolvers/datasets';
import { EventLogResolver } from './resolvers/event-log';
import { VisionItemFields, VisionResolver } from './resolvers/vision';

let built: Promise<GraphQLSchema> | undefined;

/** The schema, built once from the decorated classes (code first). */
export function graphqlSchema(): Promise<GraphQLSchema> {
  built ??= buildSchema({
    resolvers: [
      AccountResolver,
      OrganisationFields,
      DatasetResolver,
      ContentEntryFields,
      EventLogResolver,
      VisionResolver,
      VisionItemFields,
    ],
    // Input rules live in the domain validators shared with REST, not in class-validator.
    validate: false,
  });
  return built;
}

/** The SDL committed as schema/schema.graphql (sorted, so diffs show real changes only). */
export async function schemaSdl(): Promise<string> {
  const header =
    '# Emitted from the code by `npm run schema:emit` (src/api/graphql). Do not edit by hand.\n\n';
  return header + printSchema(lexicographicSortSchema(await graphqlSchema())) + '\n';
}
