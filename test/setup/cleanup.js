// Deletes the queues test runs create (their prefix starts with `test.`), so quorum queues do not
// pile up on the local broker across runs. Runs before and after the production project.
const { execFileSync } = require('node:child_process');
const amqp = require('amqplib');

const TEST_QUEUE = /^test\./;

module.exports = async function deleteTestQueues() {
  let names;
  try {
    names = execFileSync('rabbitmqctl', ['-q', 'list_queues', 'name'], { encoding: 'utf8' })
      .split('\n')
      .map((l) => l.trim())
      .filter((n) => TEST_QUEUE.test(n));
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
