/** Build progress: a bar on a terminal, two lines in logs, or a callback. */
import { SingleBar, Presets } from 'cli-progress';
import type { BuildOptions, BuildPhase, BuildStats } from './options.js';

export interface Reporter {
  update(phase: BuildPhase, done: number, total: number): void;
  finish(stats: BuildStats): void;
  fail(): void;
}

const PHASE_LABEL: Record<BuildPhase, string> = {
  read: 'reading GloVe vectors',
  weigh: 'weighting (SIF)     ',
  components: 'common components   ',
  write: 'writing model files ',
};

export function makeReporter(mode: NonNullable<BuildOptions['progress']>, outDir: string): Reporter {
  if (typeof mode === 'function') return { update: mode, finish: () => {}, fail: () => {} };
  if (mode === 'silent') return { update: () => {}, finish: () => {}, fail: () => {} };
  const useBar = mode === 'bar' || (mode === 'auto' && process.stderr.isTTY === true);
  if (!useBar) {
    // Logs and CI get two lines rather than a bar redrawn thousands of times.
    process.stderr.write(`toolrouter: building offline embedding model into ${outDir} ...\n`);
    return {
      update: () => {},
      finish: (s) => process.stderr.write(`toolrouter: offline model built: ${s.words} words, ${mb(s.bytes)}, ${(s.ms / 1000).toFixed(1)} s\n`),
      fail: () => process.stderr.write('toolrouter: offline model build failed\n'),
    };
  }
  const bar = new SingleBar(
    { format: ' {phase} [{bar}] {percentage}%', hideCursor: true, clearOnComplete: false, stopOnComplete: false },
    Presets.shades_classic,
  );
  let current: BuildPhase | null = null;
  let started = false;
  return {
    update(phase, done, total) {
      if (!started) {
        process.stderr.write(`Building offline embedding model -> ${outDir}\n`);
        bar.start(total, 0, { phase: PHASE_LABEL[phase] });
        started = true;
        current = phase;
      } else if (phase !== current) {
        bar.setTotal(total);
        current = phase;
      }
      bar.update(done, { phase: PHASE_LABEL[phase] });
    },
    finish(s) {
      if (started) bar.stop();
      process.stderr.write(`Done: ${s.words} words x ${s.dimensions} dims (${s.precision}), ${mb(s.bytes)}, ${(s.ms / 1000).toFixed(1)} s\n`);
    },
    fail() {
      if (started) bar.stop();
    },
  };
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
