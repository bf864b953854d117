import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config/env';
import { startPopularityRollup } from '../jobs/popularity';
import { adoptEmbedder, startRecovery } from '../jobs/recovery';
import { buildContainer, type Container } from './container';
import { buildApiServer, buildOpsServer } from './http';

export interface RunningApp {
  container: Container;
  server?: FastifyInstance;
  /** Where the API listens (when the api role runs). */
  url?: string;
  /** Where /healthz and /readyz are served (every process). */
  healthUrl: string;
  stop(): Promise<void>;
}

/** Starts the roles named in APP_ROLES on one container. */
export async function startApp(
  config: Config,
  opts: { log?: Logger; now?: () => number } = {},
): Promise<RunningApp> {
  const container = await buildContainer(config, opts);
  const { ports } = container;
  let url: string | undefined;
  let recovery: ReturnType<typeof startRecovery> | undefined;
  let rollup: ReturnType<typeof startPopularityRollup> | undefined;
  let webhookWork: { stop(): Promise<void> } | undefined;
  let duplicatePass: { stop(): Promise<void> } | undefined;
  let tuningPass: { stop(): Promise<void> } | undefined;
  if (config.APP_ROLES.has('worker')) {
    // While the store is down, jobs wait in the queue instead of burning their attempts.
    const storeAnswers = async (): Promise<void> => {
      await Promise.all([ports.content.ping(), ports.accounts.ping()]);
    };
    await ports.queue.consume(
      container.processImage.handle,
      container.processImage.jobsInHand,
      storeAnswers,
    );
    await adoptEmbedder(ports.accounts, container.embedder, container.log);
    recovery = startRecovery(ports.content, ports.queue, container.log, container.embedder.id);
    await recovery.sweep();
    rollup = startPopularityRollup(
      ports.counts,
      opts.now ?? Date.now,
      container.log.child({ component: 'popularity' }),
    );
    webhookWork = container.startWebhookWork();
    if (config.DUPLICATE_REPORT === 'on') duplicatePass = container.startDuplicatePass();
    tuningPass = container.startTuningPass();
  }
  // A worker-only process serves its health on PORT too, for an orchestrator's probes.
  const server: FastifyInstance = config.APP_ROLES.has('api')
    ? await buildApiServer(container.services, config, container.log)
    : await buildOpsServer(container.services, config, container.log);
  let address: string;
  try {
    address = await server.listen({ port: config.PORT, host: config.HOST });
  } catch (e) {
    // e.g. PORT taken: leave nothing running behind the error (the worker already consumes)
    recovery?.stop();
    await rollup?.stop();
    await webhookWork?.stop();
    await duplicatePass?.stop();
    await tuningPass?.stop();
    await ports.queue.stop().catch(() => undefined);
    await container.close().catch(() => undefined);
    throw e;
  }
  const listening = `http://${config.HOST === '0.0.0.0' || config.HOST === '::' ? 'localhost' : config.HOST}:${new URL(address).port}`;
  if (config.APP_ROLES.has('api')) url = listening;
  let stopped = false;
  return {
    container,
    server,
    url,
    healthUrl: listening,
    async stop() {
      if (stopped) return;
      stopped = true;
      recovery?.stop();
      await rollup?.stop();
      await server?.close();
      // attempts in flight finish; a claim left behind lapses for another worker to resend
      await webhookWork?.stop();
      await duplicatePass?.stop();
      await tuningPass?.stop();
      // jobs not yet at an image slot go back to the queue now instead of downloading
      container.processImage.stop();
      await ports.queue.stop();
      await container.close();
    },
  };
}
