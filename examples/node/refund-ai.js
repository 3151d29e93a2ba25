// refund-ai.js: a support agent on the Vercel AI SDK whose refund tool goes
// through Interlock's gate (@interlockhq/client/ai). The model asks for a
// refund of 1200; the rule large-refund makes it wait for a supervisor (run
// bot.js, or decide in the inbox); the tool runs with the decided args, or
// the model reads who refused it and why.
//
//   INTERLOCK_URL=nats://127.0.0.1:4222 node refund-ai.js
import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import { gateTools } from "@interlockhq/client/ai";
import { WAIT_MS, connectInterlock, say } from "./connect.js";
import { aiModel } from "./scripted.js";

const interlock = await connectInterlock("/agents/node-example-ai");

const tools = gateTools(interlock, {
  issue_refund: tool({
    description: "Refund an order",
    inputSchema: jsonSchema({ type: "object", properties: { orderId: { type: "string" }, amount: { type: "number" }, currency: { type: "string" } }, required: ["orderId", "amount"] }),
    execute: async (args) => {
      say("tool.called", { sdk: "ai", tool: "issue_refund", args });
      return { refunded: args.amount, orderId: args.orderId };
    },
  }),
}, { agent: "node-example-ai", wait: WAIT_MS });

const { text } = await generateText({ model: aiModel(), tools, prompt: "Refund order o-1 in full.", stopWhen: stepCountIs(3) });
say("done", { sdk: "ai", text });
await interlock.close();
