// The OpenAI Agents SDK adapter against a real Interlock: a scripted model
// calls a gated tool; the run stops on the interruption, its state is
// serialized, a person decides in Interlock, and a new Agent loads the
// state, settles the interruption by the decision and resumes.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Agent, type AgentInputItem, type Model, type ModelRequest, type ModelResponse, RunState, Runner, Usage, tool } from "@openai/agents";
import { z } from "zod";
import type { Interlock, JsonObject, ResumeInput } from "../src/index.js";
import { settleInterruptions, withGate } from "../src/openai-agents.js";
import { WAIT, id, pendingOf, transports } from "./env.js";

/** A model that calls issue_refund with args once, then says what the tool returned. */
class ScriptedModel implements Model {
  constructor(
    private readonly callId: string,
    private readonly args: JsonObject,
  ) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = typeof request.input === "string" ? [] : request.input;
    const result = items.find((i: AgentInputItem) => i.type === "function_call_result" && i.callId === this.callId);
    if (result === undefined) {
      return {
        usage: new Usage(),
        output: [{ type: "function_call", callId: this.callId, name: "issue_refund", arguments: JSON.stringify(this.args), status: "completed" }],
      };
    }
    const said = result.type === "function_call_result" ? result.output : undefined;
    return {
      usage: new Usage(),
      output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: `the tool said: ${JSON.stringify(said)}` }] }],
    };
  }
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("the scripted model does not stream");
  }
}

/** A support agent with a gated refund tool, as a fresh process would build it; ran records each refund. */
function supportAgent(c: Interlock, callId: string, args: JsonObject, ran: JsonObject[]) {
  const refund = tool(
    withGate(
      c,
      {
        name: "issue_refund",
        description: "Refund an order",
        parameters: z.object({ orderId: z.string(), amount: z.number() }),
        execute: async (input: { orderId: string; amount: number }) => {
          ran.push(input);
          return `refunded ${input.amount} on ${input.orderId}`;
        },
      },
      { agent: "openai-agents-test", checkWait: 300, wait: WAIT },
    ),
  );
  return new Agent({ name: "support", instructions: "Refund orders.", model: new ScriptedModel(callId, args), tools: [refund] });
}

for (const tr of transports) {
  describe(`the OpenAI Agents SDK's approvals decided in Interlock, over ${tr.name}`, () => {
    let c: Interlock;
    const runner = new Runner({ tracingDisabled: true });
    before(async () => {
      c = await tr.connect();
    });
    after(async () => {
      await c.close();
    });

    /**
     * Runs the agent until it stops on the gated call, keeps only the
     * serialized state, decides the call in Interlock, then loads the state
     * into a new Agent, settles and resumes it.
     */
    async function acrossARestart(args: JsonObject, decision: Omit<ResumeInput, "approver">) {
      const callId = id("call_");
      const ranBefore: JsonObject[] = [];
      const first = await runner.run(supportAgent(c, callId, args, ranBefore), "Refund the order, please.");
      assert.equal(first.interruptions.length, 1, "the gated call interrupts the run");
      assert.equal(first.interruptions[0]?.name, "issue_refund");
      assert.deepEqual(ranBefore, []);
      const saved = first.state.toString();

      await pendingOf(c, "gate", callId);
      await c.resume("gate", callId, { ...decision, ...tr.approver }, { wait: WAIT });

      const ran: JsonObject[] = [];
      const agent = supportAgent(c, callId, args, ran);
      const state = await RunState.fromString(agent, saved);
      const settled = await settleInterruptions(c, state, { wait: WAIT });
      const result = await runner.run(agent, state);
      return { ran, settled, result };
    }

    it("runs a call no rule stops without interrupting the run", async () => {
      const ran: JsonObject[] = [];
      const result = await runner.run(supportAgent(c, id("call_"), { orderId: "o-1", amount: 80 }, ran), "Refund it.");
      assert.equal(result.interruptions.length, 0);
      assert.deepEqual(ran, [{ orderId: "o-1", amount: 80 }]);
      assert.match(String(result.finalOutput), /refunded 80 on o-1/);
    });

    it("runs the call after a restart once a person approves it in Interlock", async () => {
      const { ran, settled, result } = await acrossARestart({ orderId: "o-2", amount: 900 }, { decision: "approve", reason: "ok" });
      assert.equal(settled.approved.length, 1);
      assert.deepEqual(ran, [{ orderId: "o-2", amount: 900 }]);
      assert.match(String(result.finalOutput), /refunded 900 on o-2/);
    });

    it("runs the call with the approver's edited args", async () => {
      const { ran, settled, result } = await acrossARestart({ orderId: "o-3", amount: 1500 }, { decision: "edit", edits: { amount: 500 }, reason: "half now" });
      assert.equal(settled.approved[0]?.decision.decision, "edited");
      assert.deepEqual(ran, [{ orderId: "o-3", amount: 500 }]);
      assert.match(String(result.finalOutput), /refunded 500 on o-3/);
    });

    it("rejects the call with the approver's reason, which the model reads", async () => {
      const { ran, settled, result } = await acrossARestart({ orderId: "o-4", amount: 9000 }, { decision: "reject", reason: "over the order's total" });
      assert.equal(settled.rejected.length, 1);
      assert.deepEqual(ran, []);
      assert.match(String(result.finalOutput), new RegExp(`${tr.decidedBy} rejected the call: over the order's total`));
    });

    it("leaves a call nobody decided pending, and the run stays interrupted", async () => {
      const callId = id("call_");
      const first = await runner.run(supportAgent(c, callId, { orderId: "o-5", amount: 700 }, []), "Refund it.");
      const state = await RunState.fromString(supportAgent(c, callId, { orderId: "o-5", amount: 700 }, []), first.state.toString());
      const settled = await settleInterruptions(c, state, { wait: 200 });
      assert.deepEqual([settled.approved.length, settled.rejected.length, settled.pending.length], [0, 0, 1]);
      assert.equal(settled.pending[0]?.decision.decision, "pending");
    });
  });
}
