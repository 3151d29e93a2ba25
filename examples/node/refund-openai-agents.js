// refund-openai-agents.js: a support agent on the OpenAI Agents SDK whose
// refund tool's approval is decided in Interlock
// (@interlockhq/client/openai-agents). The run stops on the refund's
// approval; its state is serialized (a real service stores it and may stop
// here); then a new Agent loads it, settles the approval by Interlock's
// decision (run bot.js, or decide in the inbox), and resumes.
//
//   INTERLOCK_URL=nats://127.0.0.1:4222 node refund-openai-agents.js
import { Agent, RunState, Runner, tool } from "@openai/agents";
import { z } from "zod";
import { settleInterruptions, withGate } from "@interlockhq/client/openai-agents";
import { WAIT_MS, connectInterlock, say } from "./connect.js";
import { agentsModel } from "./scripted.js";

const interlock = await connectInterlock("/agents/node-example-openai-agents");
const model = agentsModel();

// The agent, as each process builds it.
function supportAgent() {
  const refund = tool(withGate(interlock, {
    name: "issue_refund",
    description: "Refund an order",
    parameters: z.object({ orderId: z.string(), amount: z.number(), currency: z.string() }),
    execute: async (args) => {
      say("tool.called", { sdk: "openai-agents", tool: "issue_refund", args });
      return `refunded ${args.amount} ${args.currency} on ${args.orderId}`;
    },
  }, { agent: "node-example-openai-agents", checkWait: 100, wait: WAIT_MS }));
  return new Agent({ name: "support", instructions: "Refund orders when asked.", model, tools: [refund] });
}

const runner = new Runner({ tracingDisabled: true });
let result = await runner.run(supportAgent(), "Refund order o-1 in full.");
if (result.interruptions.length > 0) {
  const saved = result.state.toString();
  say("interrupted", { sdk: "openai-agents", waiting: result.interruptions.map((i) => i.name), stateBytes: saved.length });
  // ... the process may stop here, and the next one carries on:
  const agent = supportAgent();
  const state = await RunState.fromString(agent, saved);
  const settled = await settleInterruptions(interlock, state, { wait: WAIT_MS });
  say("settled", { sdk: "openai-agents", approved: settled.approved.length, rejected: settled.rejected.length, pending: settled.pending.length });
  result = await runner.run(agent, state);
}
say("done", { sdk: "openai-agents", text: result.finalOutput });
await interlock.close();
