import type { StoredItem } from 'visual-search-service/dist/domain/item';
import { rng } from './common';

const CATEGORIES = ['boots', 'sneakers', 'sandals', 'heels', 'loafers', 'flats', 'clogs', 'mules'];
const COLORS = ['black', 'white', 'red', 'blue', 'green', 'brown', 'beige', 'grey', 'pink', 'navy'];
const SIZES: Array<string | number> = [36, 37, 38, 39, 40, 41, 42, 43, 44, 'S', 'M', 'L', 'XL'];

/**
 * A shop-like catalogue: categories, brands, colours, prices, a size that is a number on some
 * items and a string on others, tags (an array field) and a title for text search.
 */
export function* catalogue(n: number, seed = 42): Generator<StoredItem> {
  const r = rng(seed);
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
  const t0 = Date.UTC(2026, 0, 1);
  for (let i = 0; i < n; i++) {
    const category = pick(CATEGORIES);
    const color = pick(COLORS);
    const brand = `brand-${Math.floor(r() * 200)}`;
    const id = `sku-${String(i).padStart(7, '0')}`;
    const url = `https://img.example.com/${id}.jpg`;
    yield {
      id,
      url,
      metadata: {
        category,
        brand,
        color,
        price: Math.round(r() * 50000) / 100,
        size: pick(SIZES),
        instock: r() < 0.7,
        rating: Math.round(r() * 50) / 10,
        tags: [pick(COLORS), pick(CATEGORIES)],
        title: `${color} ${category} by ${brand}`,
      },
      privateMetadata: { cost: Math.round(r() * 20000) / 100 },
      state: 'processed',
      createdAt: t0 + i * 1000,
      updatedAt: t0 + i * 1000,
      image: { width: 600 + (i % 400), height: 800, url },
    };
  }
}

/** A realistic listing query; the page and price window vary so no single result is cached. */
export function listingQuery(i: number): {
  q: string;
  sort: string;
  order: string;
  page: number;
  limit: number;
} {
  const lo = 20 + (i % 10) * 5;
  return {
    q: `category:boots|sneakers|loafers,price:${lo}:${lo + 250},instock:true,color:!pink`,
    sort: 'price',
    order: i % 2 ? 'asc' : 'desc',
    page: 1 + (i % 5),
    limit: 24,
  };
}
