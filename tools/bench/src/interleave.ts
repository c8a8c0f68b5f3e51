// The order contenders take turns in when they are interleaved operation by operation: round r
// runs every contender once, in row r of a Williams square. Over any n consecutive rounds each
// contender takes every position once (no one always goes first on a warming machine) and
// follows every other contender exactly once (no one always runs right after the
// same neighbour, whose cache or CPU-frequency wake it would inherit; an odd n takes 2n rounds
// for that). For two contenders it is A B, B A, A B, …

/**
 * Row `round` of the Williams square over `contenders`. An odd n needs the square and its mirror
 * for the neighbours to balance: rounds n..2n-1 run the rows of 0..n-1 backwards.
 */
export function roundOrder<T>(contenders: readonly T[], round: number): T[] {
  const n = contenders.length;
  if (!Number.isInteger(round) || round < 0)
    throw new Error(`round ${round} is not a whole number from 0`);
  // The first row is 0, 1, n-1, 2, n-2, …; row r adds r to each, modulo n.
  const first = Array.from({ length: n }, (_, j) =>
    j === 0 ? 0 : j % 2 === 1 ? (j + 1) / 2 : n - j / 2,
  );
  const row = first.map((j) => contenders[(j + round) % n] as T);
  return n % 2 === 1 && Math.floor(round / n) % 2 === 1 ? row.reverse() : row;
}

/** One operation of an interleaved phase: allocation `index` of `contender`, in round `index`. */
export interface Turn<T> {
  readonly contender: T;
  readonly index: number;
}

/** Every turn of `n` rounds, in the order they run: round i is allocation i of each contender. */
export function interleave<T>(contenders: readonly T[], n: number, firstRound = 0): Turn<T>[] {
  const turns: Turn<T>[] = [];
  for (let i = 0; i < n; i++)
    for (const contender of roundOrder(contenders, firstRound + i))
      turns.push({ contender, index: i });
  return turns;
}
