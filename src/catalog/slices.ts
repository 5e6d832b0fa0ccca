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
