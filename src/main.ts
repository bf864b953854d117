import { startupBanner } from './app/banner';
import { startApp } from './app/start';
import { ConfigError, loadConfig } from './config/env';

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
  const lines = startupBanner(config, {
    url: app.url,
    healthUrl: app.healthUrl,
    embedder: app.container.embedder,
    bootstrapOperatorToken: app.container.bootstrapOperatorToken,
  });
  if (config.ignored.length)
    log.warn({ ignored: config.ignored }, 'settings given that this configuration does not use');
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
