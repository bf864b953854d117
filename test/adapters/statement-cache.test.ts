import { openDb, stmt } from '../../src/adapters/embedded/db';

test('statements are reused per SQL text, least recently used evicted beyond 500', () => {
  const db = openDb(':memory:');
  try {
    const hot = 'SELECT 1 AS one';
    const first = stmt(db, hot);
    expect(stmt(db, hot)).toBe(first);
    const zero = stmt(db, 'SELECT 0 AS n');
    // 600 distinct texts (as q filters and IN lists make), touching the hot one throughout
    for (let i = 0; i < 600; i++) {
      stmt(db, `SELECT ${i} AS n`);
      if (i % 100 === 0) expect(stmt(db, hot)).toBe(first);
    }
    expect(stmt(db, hot)).toBe(first); // recently used: kept
    const early = stmt(db, 'SELECT 0 AS n');
    expect(early).not.toBe(zero); // the cache is bounded
    expect(early.get()).toEqual({ n: 0 }); // evicted long ago: prepared afresh, still correct
    expect(stmt(db, 'SELECT 0 AS n')).toBe(early);
  } finally {
    db.close();
  }
});
