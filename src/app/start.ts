import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildRestServer } from '../api/rest/server';
import type { Config } from '../config/env';
import { adoptEmbedder, startRecovery } from '../jobs/recovery';
import { buildContainer, type Container } from './container';

export interface RunningApp {
  container: Container;
  server?: FastifyInstance;
  /** Where the API listens (when the api role runs). */
  url?: string;
  stop(): Promise<void>;
}

/** Starts the roles named in APP_ROLES on one container. */
export async function startApp(
  config: Config,
  opts: { log?: Logger; now?: () => number } = {},
): Promise<RunningApp> {
  const container = await buildContainer(config, opts);
  let server: FastifyInstance | undefined;
  let url: string | undefined;
  let recovery: ReturnType<typeof startRecovery> | undefined;
  if (config.APP_ROLES.has('worker')) {
    // While the store is down, jobs wait in the queue instead of burning their attempts.
    const storeAnswers = async (): Promise<void> => {
      await Promise.all([container.content.ping(), container.accounts.ping()]);
    };
    await container.queue.consume(
      container.processImage.handle,
      config.WORKER_CONCURRENCY,
      storeAnswers,
    );
    await adoptEmbedder(container.accounts, container.embedder, container.log);
    recovery = startRecovery(
      container.content,
      container.queue,
      container.log,
      container.embedder.id,
    );
    await recovery.sweep();
  }
  if (config.APP_ROLES.has('api')) {
    server = await buildRestServer(container);
    const address = await server.listen({ port: config.PORT, host: config.HOST });
    const port = new URL(address).port;
    url = `http://${config.HOST === '0.0.0.0' || config.HOST === '::' ? 'localhost' : config.HOST}:${port}`;
  }
  let stopped = false;
  return {
    container,
    server,
    url,
    async stop() {
      if (stopped) return;
      stopped = true;
      recovery?.stop();
      await server?.close();
      await container.queue.stop();
      await container.close();
    },
  };
}
