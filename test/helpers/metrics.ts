import type { Metrics } from '../../src/metrics.js';

/** The current value of a counter's series with these labels in one router's registry (0 when never touched). */
export async function counter(api: { router: { metrics: Metrics } }, name: string, labels: Record<string, string>): Promise<number> {
  const metric = await api.router.metrics.registry.getSingleMetric(name)?.get();
  return metric?.values.find((entry) => Object.entries(labels).every(([key, wanted]) => entry.labels[key] === wanted))?.value ?? 0;
}
