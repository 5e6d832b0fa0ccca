/** `toolrouter models build`: the offline model, into the models directory serve would load it from. */
import { ensureOfflineModel } from '../embedding/offline-model.js';
import { startConfig } from './startup.js';

export async function buildModels(options: { force?: boolean; strictConfig?: boolean }): Promise<void> {
  // MODELS_DIR, embedding.modelsDir in the config file, or the default: the same directory serve reads.
  const { config } = startConfig(options);
  const dir = await ensureOfflineModel(config.embedding.modelsDir, { force: options.force === true });
  console.log(`offline model ready in ${dir}`);
}
