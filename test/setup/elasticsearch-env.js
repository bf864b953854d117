process.env.TEST_SEARCH_BACKEND = 'elasticsearch';
