/** Runs `task(0..n-1)` with at most `width` in flight; resolves when all settled (tasks catch their own errors). */
export async function pool(
  n: number,
  width: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(width, n)) }, worker));
}
