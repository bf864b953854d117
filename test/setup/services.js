// Starts the local Elasticsearch and RabbitMQ (scripts/services.sh is idempotent: it does
// nothing for a service that is already reachable), then clears queues left by earlier runs.
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const deleteTestQueues = require('./cleanup');

module.exports = async () => {
  execFileSync('bash', [path.join(__dirname, '../../scripts/services.sh'), 'up'], {
    stdio: 'inherit',
  });
  await deleteTestQueues();
};
