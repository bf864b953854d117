// graphql-ws publishes its `ws` server only as the export `graphql-ws/use/ws`, which this
// project's `moduleResolution: node` cannot see; Node resolves it at run time all the same.
declare module 'graphql-ws/use/ws' {
  export * from 'graphql-ws/dist/use/ws';
}
