import { GraphQLJSON, GraphQLJSONObject } from 'graphql-scalars';

/** Any JSON value (a metadata value, or a whole metadata object). */
export const JSONScalar = GraphQLJSON;
export const JSONObjectScalar = GraphQLJSONObject;
