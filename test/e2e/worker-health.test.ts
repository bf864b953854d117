import pino from 'pino';
import { startApp } from '../../src/app/start';
import { loadConfig } from '../../src/config/env';
import { OPERATOR, tempDir } from '../helpers/app';

test('a worker-only process serves /healthz and /readyz on PORT, and nothing of the API', async () => {
  const app = await startApp(
    loadConfig({
      APP_ROLES: 'worker',
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: tempDir(),
      OPERATOR_TOKEN: OPERATOR,
      EMBEDDER: 'descriptor',
    }),
    { log: pino({ level: 'silent' }) },
  );
  try {
    expect(app.url).toBeUndefined();
    const health = await fetch(`${app.healthUrl}/healthz`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
    const ready = await fetch(`${app.healthUrl}/readyz`);
    expect(ready.status).toBe(200);
    const api = await fetch(`${app.healthUrl}/orgs`, {
      headers: { authorization: `token ${OPERATOR}` },
    });
    expect(api.status).toBe(404);
    expect(((await api.json()) as { error: { code: string } }).error.code).toBe('not_found');
  } finally {
    await app.stop();
  }
});
