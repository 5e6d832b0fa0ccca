/**
 * A model folder's tokenizer (tokenizer.json + tokenizer_config.json) through `@huggingface/tokenizers`, the library
 * transformers.js v4 itself tokenises with, without the ONNX runtime: the offline model needs only this. Batches are
 * encoded as transformers.js's PreTrainedTokenizer encodes them with {padding: false, truncation: true} (special tokens
 * added, each row cut to min(max_length, model_max_length)), so the ids are the same.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';

/** The call shape the embedder uses for both this tokenizer and transformers.js's. */
export type Tokenizer = ((
  texts: string[],
  options: { padding: boolean; truncation: boolean; return_tensor: false; max_length?: number },
) => Record<string, number[][]>) & {
  pad_token_id?: number;
  padding_side?: 'left' | 'right';
  model?: WordPieceModel;
};

/** The slice of a tokenizers.js WordPiece model that `memoizeWordPiece` wraps. */
export interface WordPieceModel {
  config?: { type?: string };
  encode?: (words: string[]) => string[];
}

export function loadFolderTokenizer(modelDir: string): Tokenizer {
  const json = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8')) as object;
  const config = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer_config.json'), 'utf8')) as {
    model_max_length?: number;
    pad_token?: string;
    padding_side?: 'left' | 'right';
  };
  const tokenizer = new HfTokenizer(json, config);
  const modelMax = config.model_max_length ?? Infinity;
  const encode: Tokenizer = (texts, options) => {
    const limit = Math.min(options.max_length ?? modelMax, modelMax);
    const input_ids: number[][] = [];
    const attention_mask: number[][] = [];
    for (const text of texts) {
      const encoded = tokenizer.encode(text);
      const cut = options.truncation && encoded.ids.length > limit;
      input_ids.push(cut ? encoded.ids.slice(0, limit) : encoded.ids);
      attention_mask.push(cut ? encoded.attention_mask.slice(0, limit) : encoded.attention_mask);
    }
    return { input_ids, attention_mask };
  };
  encode.pad_token_id = (config.pad_token === undefined ? undefined : tokenizer.token_to_id(config.pad_token)) ?? 0;
  encode.padding_side = config.padding_side ?? 'right';
  encode.model = (tokenizer.model ?? undefined) as WordPieceModel | undefined;
  return encode;
}
