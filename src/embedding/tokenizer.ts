/**
 * A model folder's tokenizer (tokenizer.json + tokenizer_config.json) through `@huggingface/tokenizers`, the library
 * transformers.js v4 itself tokenises with, without the ONNX runtime: the offline model needs only this. Batches are
 * encoded as transformers.js's PreTrainedTokenizer encodes them with {padding: false, truncation: true} (special tokens
 * added, each row cut to min(max_length, model_max_length)), so the ids are the same. BERT-shaped tokenizers (the
 * offline model's) find most texts' words in one pass of their own (bert-words.ts) and only the words go through the
 * library's WordPiece model; the ids are the library's.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import { bertWordPieceIds, type TokenizerConfigJson, type TokenizerJson } from './bert-words.js';

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
  const json = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8')) as TokenizerJson;
  const config = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer_config.json'), 'utf8')) as TokenizerConfigJson & {
    model_max_length?: number;
    pad_token?: string;
    padding_side?: 'left' | 'right';
  };
  const tokenizer = new HfTokenizer(json, config);
  const fastIds = bertWordPieceIds(tokenizer, json, config);
  const modelMax = config.model_max_length ?? Infinity;
  const encode: Tokenizer = (texts, options) => {
    const limit = Math.min(options.max_length ?? modelMax, modelMax);
    const input_ids: number[][] = [];
    const attention_mask: number[][] = [];
    for (const text of texts) {
      const ids = fastIds?.(text) ?? tokenizer.encode(text).ids;
      // Every token is attended: the library's mask is all ones, and no post-processor adds padding here.
      const kept = options.truncation && ids.length > limit ? ids.slice(0, limit) : ids;
      input_ids.push(kept);
      attention_mask.push(new Array<number>(kept.length).fill(1));
    }
    return { input_ids, attention_mask };
  };
  encode.pad_token_id = (config.pad_token === undefined ? undefined : tokenizer.token_to_id(config.pad_token)) ?? 0;
  encode.padding_side = config.padding_side ?? 'right';
  encode.model = (tokenizer.model ?? undefined) as WordPieceModel | undefined;
  return encode;
}
