import { redactUrl, type Config } from '../config/env';

/** What the start-up banner says of a running process besides its configuration. */
export interface BannerFacts {
  /** Where the API listens, when this process serves it. */
  url?: string;
  healthUrl: string;
  embedder: { id: string; dimensions: number };
  bootstrapOperatorToken?: string;
}

/**
 * The lines printed at start (contract §12): roles, address, engine, queue, embedder, and each
 * setting given that this configuration ignores, with the reason, so an operator who set it
 * learns at once that it has no effect. Credentials in URLs are masked.
 */
export function startupBanner(config: Config, app: BannerFacts): string[] {
  const roles = [...config.APP_ROLES].join(', ');
  const lines: string[] = [];
  if (app.url) {
    lines.push(`visual-search-service listening on ${app.url} (roles: ${roles})`);
    lines.push(`  console: ${app.url}/ (sign in with an organisation or dataset token)`);
    lines.push(`  health:  ${app.url}/healthz`);
    lines.push(`  GraphQL: ${app.url}/graphql (open it in a browser for GraphiQL)`);
    lines.push(`  OpenAPI: ${app.url}/openapi.json`);
  } else {
    lines.push(`visual-search-service worker running (roles: ${roles})`);
    lines.push(`  health:  ${app.healthUrl}/healthz`);
  }
  lines.push(
    config.SEARCH_BACKEND === 'elasticsearch'
      ? `  engine:  elasticsearch (${config.ELASTICSEARCH_URL.map(redactUrl).join(', ')}, indices ${config.ES_INDEX_PREFIX}*; every piece of state is shared, DATA_DIR is not used)`
      : `  engine:  embedded (data in ${config.dataDir})`,
  );
  lines.push(
    `  queue:   ${config.QUEUE === 'rabbitmq' ? `rabbitmq (${redactUrl(config.AMQP_URL)}, queues ${config.AMQP_QUEUE_PREFIX}*)` : 'in-process'}`,
  );
  lines.push(`  embedder: ${app.embedder.id} (${app.embedder.dimensions} dimensions)`);
  for (const i of config.ignored) lines.push(`  ignored: ${i}`);
  if (app.bootstrapOperatorToken) {
    lines.push('');
    lines.push(
      `  Operator token (shown once, stored only as a hash): ${app.bootstrapOperatorToken}`,
    );
  }
  if (app.url) {
    lines.push('');
    lines.push('  Next: create an organisation with the operator token:');
    lines.push(`    curl -X POST ${app.url}/orgs -H 'Authorization: token <OPERATOR_TOKEN>' \\`);
    lines.push(`         -H 'Content-Type: application/json' -d '{"name":"acme"}'`);
    lines.push('  Then see README.md ("Quick start") for datasets, content and search,');
    lines.push('  or stop this and run `npm run demo` to see a real catalogue in the console.');
  }
  return lines;
}
