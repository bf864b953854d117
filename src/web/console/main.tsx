/**
 * The web console, served at `/` and bundled by scripts/build-web.mjs. It talks only
 * to the public API of the server that served it, with the token the user signs in with.
 */
import { render } from 'preact';
import { App } from './app';
import './console.css';

const root = document.getElementById('app');
if (root) {
  root.textContent = '';
  render(<App />, root);
}
