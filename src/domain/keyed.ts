/**
 * An object keyed by client input (metadata keys, field names, values): with no prototype, a
 * key such as `__proto__` or `constructor` is an own entry like any other, neither the
 * prototype's setter nor an inherited value. JSON.stringify writes it as a plain object.
 */
export const keyed = <V>(): Record<string, V> => Object.create(null) as Record<string, V>;
