/**
 * Shape limits for GraphQL operations (graphql-armor), checked before anything runs. Generous
 * enough for any real client (the deepest useful query is 7 levels); content batches belong in
 * variables, which do not count as tokens.
 */
export const GRAPHQL_LIMITS = {
  maxDepth: 10,
  maxAliases: 15,
  maxCost: 5000,
  maxTokens: 5000,
  maxDirectives: 20,
} as const;
