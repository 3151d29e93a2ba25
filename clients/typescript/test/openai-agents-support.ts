// The support agent of the OpenAI Agents SDK adapter's tests, as each
// process builds it: a scripted model and a gated refund tool. Run as a
// script (node openai-agents-support.js TRANSPORT CALLID ARGS), it runs the
// agent until the gated call interrupts it and prints the serialized state
// (and the refunds it made: none), as an agent process that then stops.
import { Agent, type AgentInputItem, type Model, type ModelRequest, type ModelResponse, Runner, Usage, tool } from "@openai/agents";
import { z } from "zod";
import type { Interlock, JsonObject } from "../src/index.js";
import { withGate } from "../src/openai-agents.js";
import { WAIT, transports } from "./env.js";

/** A model that calls issue_refund with args once, then says what the tool returned. */
export class ScriptedModel implements Model {
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
export function supportAgent(c: Interlock, callId: string, args: JsonObject, ran: JsonObject[]) {
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

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const [name, callId, args] = process.argv.slice(2);
  const tr = transports.find((t) => t.name === name);
  if (tr === undefined || callId === undefined || args === undefined) throw new Error("usage: node openai-agents-support.js nats|http CALLID ARGS");
  const c = await tr.connect();
  const ran: JsonObject[] = [];
  const result = await new Runner({ tracingDisabled: true }).run(supportAgent(c, callId, JSON.parse(args) as JsonObject, ran), "Refund the order, please.");
  process.stdout.write(JSON.stringify({ interruptions: result.interruptions.map((i) => i.name), ran, state: result.state.toString() }));
  await c.close();
}
