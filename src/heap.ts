import v8 from 'node:v8';

/**
 * Sets V8's heap growing factor (`heapGrowingPercent`) for this process. V8 reads the flag whenever it sets the heap's
 * next limit (after each full collection), so setting it at start takes effect for the whole process, worker threads
 * included; 0 leaves V8's own choice. The processes that hold a catalog call it: `serve`, `worker`, the bench server.
 */
export function limitHeapGrowth(percent: number): void {
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
