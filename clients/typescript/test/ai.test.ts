// The Vercel AI SDK adapter against a real Interlock: a scripted model
// (the SDK's MockLanguageModelV3) calls a gated tool, the test decides the
// call through Interlock, and the tool runs, runs edited, or does not run
// with the refusal fed back to the model.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generateText, stepCountIs, tool, jsonSchema } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import type { LanguageModelV3CallOptions, LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import { ApprovalTakenError, ArgumentError, type Interlock, type JsonObject, type ResumeInput } from "../src/index.js";
import { gateTools } from "../src/ai.js";
import { WAIT, id, interruptedOf, transports } from "./env.js";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A model that calls tool with args once, then says what the tool returned. */
function scriptedModel(toolCallId: string, toolName: string, args: JsonObject) {
  return new MockLanguageModelV3({
    doGenerate: async (o: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> => {
      const result = o.prompt.flatMap((m) => (m.role === "tool" ? m.content : [])).find((p) => p.type === "tool-result");
      if (result === undefined) {
        return {
          content: [{ type: "tool-call", toolCallId, toolName, input: JSON.stringify(args) }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" },
          usage,
          warnings: [],
        };
      }
      return { content: [{ type: "text", text: `the tool said: ${JSON.stringify(result.output)}` }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    },
  });
}

const refundSchema = jsonSchema<{ orderId: string; amount: number; currency?: string }>({
  type: "object",
  properties: { orderId: { type: "string" }, amount: { type: "number" }, currency: { type: "string" } },
  required: ["orderId", "amount"],
});

for (const tr of transports) {
  describe(`the AI SDK's tools through the gate, over ${tr.name}`, () => {
    let c: Interlock;
    before(async () => {
      c = await tr.connect();
    });
    after(async () => {
      await c.close();
    });

    /** Runs the scripted model on a gated tool, deciding the call with decision when not undefined. */
    async function runGated(toolName: string, args: JsonObject, decision?: Omit<ResumeInput, "approver">) {
      const toolCallId = id("call_");
      const ran: JsonObject[] = [];
      const tools = gateTools(
        c,
        {
          [toolName]: tool({
            description: "the tool under test",
            inputSchema: jsonSchema<JsonObject>({ type: "object" }),
            execute: async (input: JsonObject) => {
              ran.push(input);
              return { done: true, ...input };
            },
          }),
        },
        { agent: "ai-sdk-test", wait: decision === undefined ? 300 : WAIT },
      );
      const model = scriptedModel(toolCallId, toolName, args);
      const generating = generateText({ model, tools, prompt: "refund the order", stopWhen: stepCountIs(3) });
      if (decision !== undefined) {
        await interruptedOf(c, "gate", toolCallId);
        await c.resume("gate", toolCallId, { ...decision, ...tr.approver }, { wait: WAIT });
      }
      const out = await generating;
      const toolResult = out.steps[0]?.toolResults[0];
      return { ran, out, toolResult, toolCallId, model };
    }

    it("runs a call no rule stops at once, with the model's args", async () => {
      const { ran, out } = await runGated("issue_refund", { orderId: "o-1", amount: 120 }, undefined);
      assert.deepEqual(ran, [{ orderId: "o-1", amount: 120 }]);
      assert.match(out.text, /"done":true/);
    });

    it("runs an approved call with the model's args once a person approves it", async () => {
      const { ran, toolResult } = await runGated("issue_refund", { orderId: "o-2", amount: 900 }, { decision: "approve", reason: "checked" });
      assert.deepEqual(ran, [{ orderId: "o-2", amount: 900 }]);
      assert.deepEqual(toolResult?.output, { done: true, orderId: "o-2", amount: 900 });
    });

    it("runs an approved call once: the same call made again throws ApprovalTakenError and does not run the tool", async () => {
      const toolCallId = id("call_");
      const ran: JsonObject[] = [];
      const gated = gateTools(
        c,
        { issue_refund: tool({ inputSchema: jsonSchema<JsonObject>({ type: "object" }), execute: async (input: JsonObject) => (ran.push(input), input) }) },
        { wait: WAIT },
      );
      const input = { orderId: "o-6", amount: 900 };
      const first = gated.issue_refund!.execute!(input, { toolCallId, messages: [] });
      await interruptedOf(c, "gate", toolCallId);
      await c.resume("gate", toolCallId, { decision: "approve", ...tr.approver }, { wait: WAIT });
      assert.deepEqual(await first, input);
      await assert.rejects(Promise.resolve(gated.issue_refund!.execute!(input, { toolCallId, messages: [] })), ApprovalTakenError);
      assert.deepEqual(ran, [input], "the tool ran once");
    });

    it("runs an edited call with the approver's args", async () => {
      const { ran, out } = await runGated("issue_refund", { orderId: "o-3", amount: 1200, currency: "USD" }, { decision: "edit", edits: { amount: 400 }, reason: "partial" });
      assert.deepEqual(ran, [{ orderId: "o-3", amount: 400, currency: "USD" }]);
      assert.match(out.text, /"amount":400/);
    });

    it("does not run a rejected call, and the model reads who rejected it and why", async () => {
      const { ran, toolResult, out } = await runGated("issue_refund", { orderId: "o-4", amount: 9000 }, { decision: "reject", reason: "too large for a refund" });
      assert.deepEqual(ran, []);
      assert.equal(toolResult?.output, `issue_refund was not run: ${tr.decidedBy} rejected the call: too large for a refund`);
      assert.match(out.text, /too large for a refund/, "the model's next step read the reason");
    });

    it("does not run a call the approver answered instead, and the model reads the answer", async () => {
      const { ran, toolResult } = await runGated("send_contract", { customer: "ACME", value: 50_000 }, { decision: "respond", message: "send the standard terms instead" });
      assert.deepEqual(ran, []);
      assert.match(String(toolResult?.output), /answered instead: send the standard terms instead/);
    });

    it("does not run a call nobody decided within the wait, and says it waits for approval", async () => {
      const { ran, toolResult, toolCallId } = await runGated("issue_refund", { orderId: "o-5", amount: 700 }, undefined);
      assert.deepEqual(ran, []);
      assert.match(String(toolResult?.output), new RegExp(`${toolCallId} still waits for a person's approval`));
    });
  });
}

describe("gating AI SDK tools", () => {
  it("refuses a tool without execute, and a call whose input is not an object, saying what to do", async () => {
    const c = await transports[1]!.connect();
    assert.throws(() => gateTools(c, { lookup: tool({ inputSchema: jsonSchema<JsonObject>({ type: "object" }) }) }), (err: unknown) => {
      assert.ok(err instanceof ArgumentError);
      assert.match(err.message, /tool "lookup" has no execute/);
      return true;
    });
    const gated = gateTools(c, { echo: tool({ inputSchema: jsonSchema<string>({ type: "string" }), execute: async (s: string) => s }) });
    await assert.rejects(async () => gated.echo.execute!("hello", { toolCallId: id("call_"), messages: [] }), (err: unknown) => {
      assert.ok(err instanceof ArgumentError);
      assert.match(err.message, /not an object: the gate takes a tool's arguments as a JSON object; give the tool an object schema/);
      return true;
    });
    await c.close();
  });
});

// refundSchema is what a user would write; it type-checks against the adapter.
void gateTools({} as Interlock, { issue_refund: tool({ inputSchema: refundSchema, execute: async (a) => a.amount }) });
