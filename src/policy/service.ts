import { statSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { RedisBus } from '../redis/bus.js';
import { PolicyEngine } from './engine.js';
import { compilePolicies, PolicyLoadError, readPolicyFiles, type CompiledPolicies, type PolicySource } from './load.js';
import { cedarSchema } from './schema.js';
import type { PolicySettings } from './settings.js';

/** Edits arriving together (an editor's write-rename-chmod) are read once, this long after the last. */
const RELOAD_DEBOUNCE_MS = 200;

export interface PolicyServiceOptions {
  settings: PolicySettings;
  log: Logger;
  /** With Redis: every instance uses the newest policy set any of them loaded. */
  bus?: RedisBus;
  /** Reload on SIGHUP (serve); off in tests that start several services in one process. */
  sighup?: boolean;
}

/** What instances share through Redis: the validated sources and when they were loaded. */
interface SharedPolicies {
  sources: PolicySource[];
  at: number;
}

/**
 * Loads the policy files, validates them against toolrouter's schema, and keeps the engine on the newest good set:
 * reread on SIGHUP and when a file changes (debounced); a bad edit keeps the last good set and logs why. With Redis,
 * a set loaded anywhere is stored (one key, the newest wins by load time) and announced; every instance adopts it.
 */
export class PolicyService {
  readonly engine: PolicyEngine;
  readonly schema: string;
  private watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private loadedAt = 0;
  private readonly onHangup = () => void this.reload('SIGHUP');
  /** Called after another set came into use (a reload here, or one adopted from another instance). */
  onChange: (() => void) | undefined;

  private constructor(private readonly options: PolicyServiceOptions) {
    this.engine = new PolicyEngine(options.settings, options.log);
    this.schema = cedarSchema(options.settings.claims);
  }

  /** Throws PolicyLoadError (every problem: file, line, Cedar's message) when the files cannot be used: serve refuses to start. */
  static async start(options: PolicyServiceOptions): Promise<PolicyService> {
    const service = new PolicyService(options);
    if (options.settings.files.length === 0) return service;
    const sources = readPolicyFiles(options.settings.files);
    service.engine.use(compilePolicies(sources, service.schema));
    service.loadedAt = newestChange(options.settings.files);
    await service.share();
    service.watch();
    if (options.sighup !== false) process.on('SIGHUP', service.onHangup);
    return service;
  }

  /** Checks files the way start does, without starting anything (`toolrouter config check`). */
  static check(settings: PolicySettings): CompiledPolicies | undefined {
    if (settings.files.length === 0) return undefined;
    return compilePolicies(readPolicyFiles(settings.files), cedarSchema(settings.claims));
  }

  /** Rereads the files now. Resolves true when the new set is in use; a bad set is logged and the last good one kept. */
  async reload(reason = 'reload'): Promise<boolean> {
    const { settings, log } = this.options;
    try {
      const compiled = compilePolicies(readPolicyFiles(settings.files), this.schema);
      const changed = compiled.version !== this.engine.version;
      this.engine.use(compiled);
      if (changed) {
        this.loadedAt = Date.now();
        this.onChange?.();
        log.info({ reason, version: compiled.version, policies: Object.keys(compiled.policies).length }, 'policies reloaded');
        await this.publish(compiled);
      }
      return true;
    } catch (error) {
      const problems = error instanceof PolicyLoadError ? error.problems : [(error as Error).message];
      log.error({ reason, problems }, 'policy reload failed; keeping the last good policies');
      return false;
    }
  }

  close(): void {
    clearTimeout(this.timer);
    for (const watcher of this.watchers) watcher.close();
    this.watchers = [];
    process.off('SIGHUP', this.onHangup);
  }

  private get storeKey(): string {
    return this.options.bus!.keys.key('policy', 'set');
  }

  private get channel(): string {
    return this.options.bus!.keys.key('policy', 'changed');
  }

  /** Adopts the stored set when it is newer than the local files, else stores ours; then listens for others' reloads. */
  private async share(): Promise<void> {
    const bus = this.options.bus;
    if (!bus) return;
    await bus.listen(this.channel, { message: () => void this.adoptShared(), resync: () => this.adoptShared() });
    const stored = await this.readShared();
    if (stored && stored.at > this.loadedAt) await this.adoptShared(stored);
    else await this.publish(this.engine.policies!);
  }

  private async readShared(): Promise<SharedPolicies | undefined> {
    const text = await this.options.bus!.redis.get(this.storeKey);
    if (!text) return undefined;
    try {
      return JSON.parse(text) as SharedPolicies;
    } catch {
      return undefined;
    }
  }

  private async adoptShared(known?: SharedPolicies): Promise<void> {
    const shared = known ?? (await this.readShared());
    if (!shared || shared.at < this.loadedAt) return;
    try {
      const compiled = compilePolicies(shared.sources, this.schema);
      if (compiled.version === this.engine.version) return;
      this.engine.use(compiled);
      this.loadedAt = shared.at;
      this.onChange?.();
      this.options.log.info({ version: compiled.version }, 'policies adopted from another instance');
    } catch (error) {
      this.options.log.error({ problems: error instanceof PolicyLoadError ? error.problems : [(error as Error).message] }, 'shared policies are invalid here; keeping ours');
    }
  }

  private async publish(compiled: CompiledPolicies): Promise<void> {
    const bus = this.options.bus;
    if (!bus) return;
    try {
      const shared: SharedPolicies = { sources: compiled.sources, at: this.loadedAt };
      await bus.redis.set(this.storeKey, JSON.stringify(shared));
      await bus.redis.publish(this.channel, compiled.version);
    } catch (error) {
      this.options.log.warn({ err: error }, 'cannot share the policies through Redis; other instances keep theirs');
    }
  }

  /** Watches each file's directory (editors replace files, which ends a watch on the file itself). */
  private watch(): void {
    const files = new Set(this.options.settings.files.map((file) => path.resolve(file)));
    for (const dir of new Set([...files].map((file) => path.dirname(file)))) {
      try {
        const watcher = watch(dir, (_event, name) => {
          if (name !== null && !files.has(path.join(dir, name.toString()))) return;
          clearTimeout(this.timer);
          this.timer = setTimeout(() => void this.reload('file change'), RELOAD_DEBOUNCE_MS);
          this.timer.unref();
        });
        watcher.unref();
        this.watchers.push(watcher);
      } catch (error) {
        this.options.log.warn({ dir, err: error }, 'cannot watch policy files; reload with SIGHUP');
      }
    }
  }
}

function newestChange(files: readonly string[]): number {
  let newest = 0;
  for (const file of files) {
    try {
      newest = Math.max(newest, statSync(file).mtimeMs);
    } catch {
      // Read already: a file gone since is seen at the next reload.
    }
  }
  return newest;
}
