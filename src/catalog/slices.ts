/** How long catalog-sized work holds the event loop before letting requests (a /health probe, a search) through. */
export const SLICE_MS = 20;

/**
 * Runs `step(0)` … `step(count - 1)` in order, handing the event loop back whenever a slice has taken `sliceMs`: work
 * over a 100,000-tool catalog takes seconds, and done in one go it would hold every other request for as long.
 */
export async function inSlices(count: number, step: (index: number) => void, sliceMs = SLICE_MS): Promise<void> {
  let sliceStart = performance.now();
  for (let index = 0; index < count; index++) {
    step(index);
    // The clock is read every 64 steps only: a step is microseconds, a clock read is not free.
    if ((index & 63) === 63 && performance.now() - sliceStart >= sliceMs) {
      await new Promise((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
}

/**
 * `values` sorted (code-unit order, as `Array.prototype.sort` without a comparator), in sorted runs merged pairwise,
 * with the event loop handed back between runs and merges: one sort of 100,000 tool hashes held it for ~80 ms.
 */
export async function sortInSlices(values: readonly string[], run = 8_192): Promise<string[]> {
  let runs: string[][] = [];
  for (let start = 0; start < values.length; start += run) {
    if (start > 0) await new Promise((resolve) => setImmediate(resolve));
    runs.push(values.slice(start, start + run).sort());
  }
  while (runs.length > 1) {
    const merged: string[][] = [];
    for (let i = 0; i < runs.length; i += 2) {
      await new Promise((resolve) => setImmediate(resolve));
      merged.push(i + 1 < runs.length ? mergeSorted(runs[i]!, runs[i + 1]!) : runs[i]!);
    }
    runs = merged;
  }
  return runs[0] ?? [];
}

/** Two sorted arrays as one sorted array (code-unit order). */
export function mergeSorted(a: readonly string[], b: readonly string[]): string[] {
  const out = new Array<string>(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = b[j]! < a[i]! ? b[j++]! : a[i++]!;
  while (i < a.length) out[k++] = a[i++]!;
  while (j < b.length) out[k++] = b[j++]!;
  return out;
}
