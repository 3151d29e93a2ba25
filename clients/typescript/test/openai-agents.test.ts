// The OpenAI Agents SDK adapter against a real Interlock: a scripted model
// calls a gated tool; the run stops on the interruption in a process that
// prints its serialized state and ends, a person decides in Interlock, and
// a new Agent in another process loads the state, settles the
// interruption by the decision and resumes.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { RunState, Runner } from "@openai/agents";
import type { Interlock, JsonObject, ResumeInput } from "../src/index.js";
import { settleInterruptions } from "../src/openai-agents.js";
import { WAIT, id, interruptedOf, transports } from "./env.js";
import { supportAgent } from "./openai-agents-support.js";

const run = promisify(execFile);
/** The agent's first process: openai-agents-support.js run as a script. */
const agentProcess = fileURLToPath(new URL("./openai-agents-support.js", import.meta.url));

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
     * Runs the agent in a process of its own until it stops on the gated
     * call and prints the serialized state; then, that process gone,
     * decides the call in Interlock, loads the state into a new Agent,
     * settles and resumes it.
     */
    async function acrossARestart(args: JsonObject, decision: Omit<ResumeInput, "approver">) {
      const callId = id("call_");
      const { stdout } = await run(process.execPath, [agentProcess, tr.name, callId, JSON.stringify(args)], { timeout: WAIT });
      const first = JSON.parse(stdout) as { interruptions: string[]; ran: JsonObject[]; state: string };
      assert.deepEqual(first.interruptions, ["issue_refund"], "the gated call interrupts the run");
      assert.deepEqual(first.ran, [], "the first process did not refund");

      await interruptedOf(c, "gate", callId);
      await c.resume("gate", callId, { ...decision, ...tr.approver }, { wait: WAIT });

      const ran: JsonObject[] = [];
      const agent = supportAgent(c, callId, args, ran);
      const state = await RunState.fromString(agent, first.state);
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
