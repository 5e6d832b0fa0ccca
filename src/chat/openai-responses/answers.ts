import { answerFingerprint, asObject, isString, replyReader, type ConversationShape, type Json } from '../core/answers.js';
import { contentText } from '../core/query.js';

/** Items of a Responses API conversation the model produced (one answer may be several: reasoning, text, calls). */
const isOutputItem = (item: Json | undefined): boolean =>
  item !== undefined && (item.role === 'assistant' || ['function_call', 'custom_tool_call', 'reasoning'].includes(item.type as string));

function outputFingerprint(items: readonly unknown[]): string | undefined {
  let text = '';
  const ids: string[] = [];
  for (const raw of items) {
    const item = asObject(raw);
    if (item?.role === 'assistant') text += ` ${contentText(item.content)}`;
    else if (isString(item?.call_id)) ids.push(item.call_id);
  }
  return answerFingerprint(text, ids);
}

/** Responses API: the answer is the run of output items (assistant messages, function calls, reasoning) in the input. */
export const responsesShape: ConversationShape = {
  answerAt(history, index) {
    if (!isOutputItem(asObject(history[index])) || isOutputItem(asObject(history[index - 1]))) return undefined;
    let end = index;
    while (end < history.length && isOutputItem(asObject(history[end]))) end++;
    return outputFingerprint(history.slice(index, end));
  },
  reader: (answer) =>
    replyReader(
      answer,
      (json) => (Array.isArray(json.output) ? outputFingerprint(json.output) : undefined),
      () => {
        let fingerprint: string | undefined;
        const state = {
          responseId: undefined as string | undefined,
          event(data: Json) {
            const response = asObject(data.response);
            if (data.type === 'response.created' && isString(response?.id)) state.responseId = response.id;
            if (data.type === 'response.completed' && Array.isArray(response?.output)) fingerprint = outputFingerprint(response.output);
          },
          finish: () => fingerprint,
        };
        return state;
      },
    ),
};
