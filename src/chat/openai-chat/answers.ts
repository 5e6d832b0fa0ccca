import { answerFingerprint, asObject, isString, MAX_TEXT, replyReader, type ConversationShape } from '../core/answers.js';
import { contentText } from '../core/query.js';

/** Chat completions: the answer is one assistant message (text and `tool_calls`). */
export const chatShape: ConversationShape = {
  answerAt(history, index) {
    const message = asObject(history[index]);
    if (message?.role !== 'assistant') return undefined;
    const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    return answerFingerprint(contentText(message.content), calls.map((call) => asObject(call)?.id).filter(isString));
  },
  reader: (answer) =>
    replyReader(
      answer,
      (json) => {
        const message = asObject((json.choices as unknown[] | undefined)?.[0])?.message;
        return message === undefined ? undefined : chatShape.answerAt([message], 0);
      },
      () => {
        let text = '';
        const ids: string[] = [];
        return {
          event(data) {
            const delta = asObject(asObject((data.choices as unknown[] | undefined)?.[0])?.delta);
            if (!delta) return;
            if (isString(delta.content) && text.length <= MAX_TEXT) text += delta.content;
            for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
              const id = asObject(call)?.id;
              if (isString(id)) ids.push(id);
            }
          },
          finish: () => answerFingerprint(text, ids),
        };
      },
    ),
};
