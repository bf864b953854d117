// The production project: REST suites on a real Elasticsearch with RabbitMQ workers.
process.env.TEST_SEARCH_BACKEND = 'elasticsearch';
process.env.TEST_QUEUE = 'rabbitmq';
