// scripted.js: the models of the example's agents, scripted so that the
// example runs without a network or an API key. Each asks for one tool
// call, issue_refund with REFUND, then says what the tool answered, as a
// real model would. Swap in a real one (openai("gpt-4.1"), the Agents SDK's
// default model) and nothing else changes.
import { MockLanguageModelV3 } from "ai/test";
import { Usage } from "@openai/agents";
import { REFUND } from "./connect.js";

const usage = { inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 0, text: 0, reasoning: 0 } };

/** A Vercel AI SDK model (LanguageModelV3). */
export function aiModel() {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const result = prompt.flatMap((m) => (m.role === "tool" ? m.content : [])).find((p) => p.type === "tool-result");
      if (result === undefined) {
        const toolCallId = `call_${crypto.randomUUID().replaceAll("-", "")}`;
        return { content: [{ type: "tool-call", toolCallId, toolName: "issue_refund", input: JSON.stringify(REFUND) }], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] };
      }
      return { content: [{ type: "text", text: `Refund: ${JSON.stringify(result.output.value)}` }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    },
  });
}

/** An OpenAI Agents SDK model (Model). */
export function agentsModel() {
  const callId = `call_${crypto.randomUUID().replaceAll("-", "")}`;
  return {
    async getResponse({ input }) {
      const result = (typeof input === "string" ? [] : input).find((i) => i.type === "function_call_result");
      if (result === undefined) {
        return { usage: new Usage(), output: [{ type: "function_call", callId, name: "issue_refund", arguments: JSON.stringify(REFUND), status: "completed" }] };
      }
      const said = typeof result.output === "string" ? result.output : result.output?.text;
      return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: `Refund: ${said}` }] }] };
    },
    async *getStreamedResponse() {
      throw new Error("the scripted model does not stream");
    },
  };
}
