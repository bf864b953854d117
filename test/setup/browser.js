// The browser project needs Chromium (installed from Debian when missing) and the GraphiQL
// bundle in dist/web, which the in-process test server serves.
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const root = path.join(__dirname, '../..');

module.exports = async () => {
  const bin = execFileSync('bash', [path.join(root, 'scripts/chromium.sh')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .toString()
    .trim();
  process.env.CHROMIUM_PATH = bin;
  execFileSync('node', [path.join(root, 'scripts/build-web.mjs')], { cwd: root, stdio: 'inherit' });
};
