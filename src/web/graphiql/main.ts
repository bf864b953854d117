/**
 * The GraphiQL page's script, bundled by scripts/build-web.mjs into dist/web so the playground
 * works with no internet access (no CDN). It talks to the /graphql endpoint that served it.
 */
import { createGraphiQLFetcher } from '@graphiql/toolkit';
import { GraphiQL } from 'graphiql';
import 'graphiql/style.css';
import { createElement } from 'react';
import { createRoot } from 'react-dom/client';

// The page is served by the endpoint itself (GET /graphql from a browser).
const endpoint = location.origin + location.pathname.replace(/\/+$/, '');

const defaultQuery = `# Put your token in the Headers tab below:
#   { "Authorization": "token <ORG or dataset token>" }
# An organisation token reads and writes datasets; a dataset's browse_token runs the Vision API.

query Whoami {
  viewer {
    kind
    organisation
    dataset
  }
}
`;

const root = document.getElementById('graphiql');
if (root)
  createRoot(root).render(
    createElement(GraphiQL, {
      // Subscriptions go over a WebSocket to the same endpoint; the Headers tab's Authorization
      // becomes the connection_init payload.
      fetcher: createGraphiQLFetcher({
        url: endpoint,
        subscriptionUrl: endpoint.replace(/^http/, 'ws'),
      }),
      defaultQuery,
      defaultHeaders: JSON.stringify({ Authorization: 'token ' }, null, 2),
      shouldPersistHeaders: false,
    }),
  );
