// Deletes the queues test runs create (their prefix starts with `test.`), so quorum queues do not
// pile up on the local broker across runs. Runs before and after the production project.
// Only queues older than an hour: their prefix carries the time its installation was made
// (`test.<letter?><Date.now() in base 36>…`), and another jest run going on at the same time
// (a fault test, a second session) must keep its queues.
const { execFileSync } = require('node:child_process');
const amqp = require('amqplib');

const TEST_QUEUE = /^test\./;
const STAMP = /^test\.[a-z]?([0-9a-z]{8})/;
const KEEP_MS = 60 * 60_000;

function old(name) {
  const m = STAMP.exec(name);
  const at = m ? parseInt(m[1], 36) : NaN;
  // a prefix without a plausible time is nobody's current run
  if (!(at > Date.UTC(2020, 0, 1) && at < Date.now() + 60_000)) return true;
  return Date.now() - at > KEEP_MS;
}

module.exports = async function deleteTestQueues() {
  let names;
  try {
    names = execFileSync('rabbitmqctl', ['-q', 'list_queues', 'name'], { encoding: 'utf8' })
      .split('\n')
      .map((l) => l.trim())
      .filter((n) => TEST_QUEUE.test(n) && old(n));
  } catch {
    return; // no local broker tools: nothing of ours to clean
  }
  if (names.length === 0) return;
  const conn = await amqp.connect(process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672');
  try {
    const ch = await conn.createChannel();
    for (const n of names) await ch.deleteQueue(n);
  } finally {
    await conn.close();
  }
};
