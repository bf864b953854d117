/**
 * Which half of a contract suite this project runs. The production project sets
 * TEST_SEARCH_BACKEND=elasticsearch (test/setup/production-env.js) and runs the Elasticsearch and
 * RabbitMQ adapters; every other project runs the embedded and in-process ones, so the embedded
 * contracts need no Java, Elasticsearch or RabbitMQ and each half runs exactly once.
 */
const ON_SERVICES = process.env.TEST_SEARCH_BACKEND === 'elasticsearch';

/** The cases of a `describe.each` for this project's half: `[name, adapter]` pairs. */
export function tierOf<T>(cases: {
  local: [string, T];
  services: [string, T];
}): Array<[string, T]> {
  return [ON_SERVICES ? cases.services : cases.local];
}
