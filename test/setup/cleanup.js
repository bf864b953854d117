// Deletes the queues and exchanges test runs create (their prefix starts with `test.`), so they do
// not pile up on the local broker across runs. Runs before and after the production project.
const { execFileSync } = require('node:child_process');
const amqp = require('amqplib');

const TEST_QUEUE = /^test\./;

module.exports = async function deleteTestQueues() {
  const ours = (what) =>
    execFileSync('rabbitmqctl', ['-q', what, 'name'], { encoding: 'utf8' })
      .split('\n')
      .map((l) => l.trim())
      .filter((n) => TEST_QUEUE.test(n));
  let names;
  let exchanges;
  try {
    names = ours('list_queues');
    exchanges = ours('list_exchanges');
  } catch {
    return; // no local broker tools: nothing of ours to clean
  }
  if (names.length === 0 && exchanges.length === 0) return;
  const conn = await amqp.connect(process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672');
  try {
    const ch = await conn.createChannel();
    for (const n of names) await ch.deleteQueue(n);
    for (const n of exchanges) await ch.deleteExchange(n);
  } finally {
    await conn.close();
  }
};
