import { answerFingerprint, asObject, isString, MAX_TEXT, replyReader, type ConversationShape, type Json } from '../core/answers.js';
import { contentText } from '../core/query.js';

/** Content blocks that call a tool: `tool_use`, and server-side ones (`server_tool_use`, `mcp_tool_use`). */
const isToolUse = (block: Json | undefined): boolean => typeof block?.type === 'string' && block.type.endsWith('tool_use') && isString(block.id);

function blocksFingerprint(content: unknown): string | undefined {
  if (typeof content === 'string') return answerFingerprint(content, []);
  if (!Array.isArray(content)) return undefined;
  const blocks = content.map(asObject);
  return answerFingerprint(contentText(content), blocks.filter(isToolUse).map((block) => block!.id as string));
}

/** Anthropic Messages: the answer is one assistant message (text and `tool_use` blocks). */
export const anthropicShape: ConversationShape = {
  answerAt(history, index) {
    const message = asObject(history[index]);
    return message?.role === 'assistant' ? blocksFingerprint(message.content) : undefined;
  },
  reader: (answer) =>
    replyReader(
      answer,
      (json) => blocksFingerprint(json.content),
      () => {
        let text = '';
        const ids: string[] = [];
        return {
          event(data) {
            const block = asObject(data.content_block);
            const delta = asObject(data.delta);
            if (data.type === 'content_block_start' && isToolUse(block)) ids.push(block!.id as string);
            // Blocks are joined with a space, as contentText joins them when the history carries them back.
            else if (data.type === 'content_block_start' && block?.type === 'text') text += ` ${isString(block.text) ? block.text : ''}`;
            else if (data.type === 'content_block_delta' && delta?.type === 'text_delta' && isString(delta.text) && text.length <= MAX_TEXT) text += delta.text;
          },
          finish: () => answerFingerprint(text, ids),
        };
      },
    ),
};
