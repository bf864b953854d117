import { startApp } from './app/start';
import { ConfigError, loadConfig, redactUrl } from './config/env';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`${e.message}\nSee docs/configuration.md.\n`);
      process.exit(2);
    }
    throw e;
  }
  const app = await startApp(config);
  const { log } = app.container;
  const lines: string[] = [];
  if (app.url) {
    lines.push(
      `visual-search-service listening on ${app.url} (roles: ${[...config.APP_ROLES].join(', ')})`,
    );
    lines.push(`  console: ${app.url}/ (sign in with an organisation or dataset token)`);
    lines.push(`  health:  ${app.url}/healthz`);
    lines.push(`  GraphQL: ${app.url}/graphql (open it in a browser for GraphiQL)`);
    lines.push(`  OpenAPI: ${app.url}/openapi.json`);
  } else {
    lines.push(`visual-search-service worker running (roles: ${[...config.APP_ROLES].join(', ')})`);
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
  lines.push(
    `  embedder: ${app.container.embedder.id} (${app.container.embedder.dimensions} dimensions)`,
  );
  for (const i of config.ignored) lines.push(`  ignored: ${i}`);
  if (config.ignored.length)
    log.warn({ ignored: config.ignored }, 'settings given that this configuration does not use');
  if (app.container.bootstrapOperatorToken) {
    lines.push('');
    lines.push(
      `  Operator token (shown once, stored only as a hash): ${app.container.bootstrapOperatorToken}`,
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
  process.stdout.write(`${lines.join('\n')}\n`);

  const shutdown = (signal: string): void => {
    log.info({ signal }, 'shutting down: finishing in-flight work');
    app.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
