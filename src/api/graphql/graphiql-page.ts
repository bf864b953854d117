import fs from 'node:fs';
import path from 'node:path';
import { WEB_DIR } from '../web-assets';

export interface WebAssets {
  /** File name → contents, read once at start-up. */
  files: Map<string, Buffer>;
  missing: boolean;
}

export function loadWebAssets(dir = WEB_DIR): WebAssets {
  const files = new Map<string, Buffer>();
  if (fs.existsSync(dir))
    for (const name of fs.readdirSync(dir)) files.set(name, fs.readFileSync(path.join(dir, name)));
  return { files, missing: !files.has('graphiql.js') };
}

/** Everything the page loads comes from this server; the CSP makes a CDN reference fail loudly. */
export const PAGE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
].join('; ');

export function graphiqlHtml(assets: WebAssets): string {
  if (assets.missing)
    return `<!doctype html><meta charset="utf-8"><title>GraphiQL</title>
<p>The GraphiQL bundle is missing: run <code>npm run build</code>, then reload.</p>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>GraphiQL · visual-search-service</title>
<link rel="stylesheet" href="/graphql/assets/graphiql.css">
<style>html, body, #graphiql { height: 100%; margin: 0; }</style>
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
<script src="/graphql/assets/graphiql.js"></script>
</body>
</html>
`;
}
