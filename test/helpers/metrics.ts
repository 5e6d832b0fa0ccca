import { metrics } from '../../src/metrics.js';

/** The current value of a counter's series with these labels (0 when that series was never touched). */
export async function counter(name: string, labels: Record<string, string>): Promise<number> {
  const metric = await metrics.getSingleMetric(name)?.get();
  return metric?.values.find((entry) => Object.entries(labels).every(([key, wanted]) => entry.labels[key] === wanted))?.value ?? 0;
}
