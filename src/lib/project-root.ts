import path from 'node:path';

/**
 * The installation's root directory (package.json, models/): this file sits two levels below it
 * both as source (src/lib) and compiled (dist/lib).
 */
export const PROJECT_ROOT = path.resolve(__dirname, '../..');
