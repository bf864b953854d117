// Starts the local Elasticsearch and RabbitMQ (scripts/services.sh is idempotent: it does
// nothing for a service that is already reachable).
const { execFileSync } = require('node:child_process');
const path = require('node:path');

module.exports = async () => {
  execFileSync('bash', [path.join(__dirname, '../../scripts/services.sh'), 'up'], {
    stdio: 'inherit',
  });
};
