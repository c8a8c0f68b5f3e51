// How the report prints its figures.
import type { RatioInterval } from './stats.js';

export const f1 = (n: number): string => (Number.isFinite(n) ? n.toFixed(1) : '–');
export const f2 = (n: number): string => (Number.isFinite(n) ? n.toFixed(2) : '–');
/** A ratio and its interval: `0.97× [0.95, 0.99]`. */
export const fr = (r: RatioInterval): string => `${f2(r.ratio)}× [${f2(r.lo)}, ${f2(r.hi)}]`;
