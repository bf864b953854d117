import type { RunningApp } from '../../src/app/start';
import { OPERATOR } from './app';

/**
 * Every process's /metrics text, and the sum over them of one counter's samples whose labels
 * start with `labels` (e.g. `outcome="delivered"`): a count the installation made, wherever.
 */
export async function scrapeAll(hosts: RunningApp[]): Promise<{
  text: string;
  sum(metric: string, labels: string): number;
}> {
  const texts = await Promise.all(
    hosts.map(async (h) => {
      const r = await fetch(`${h.healthUrl}/metrics`, {
        headers: { authorization: `token ${OPERATOR}` },
      });
      if (r.status !== 200) throw new Error(`/metrics answered ${r.status}`);
      return r.text();
    }),
  );
  const lines = texts.flatMap((x) => x.split('\n'));
  return {
    text: texts.join('\n'),
    sum: (metric, labels) =>
      lines
        .filter((l) => l.startsWith(`${metric}{${labels}`))
        .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0),
  };
}
