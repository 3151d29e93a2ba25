// What the agent SDK adapters (ai.ts, openai-agents.ts, langgraph.ts)
// share: a gate callId from an SDK's tool call id, and the text a model
// reads when the gate does not let a call run.
import { createHash } from "node:crypto";
import type { JsonObject, ToolCall, ToolDecision } from "./types.js";
import { isObject } from "./common.js";
import { ArgumentError } from "./errors.js";

const nameRule = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * An Interlock name (a callId, an askId) for an SDK's id: the id itself
 * when it is a valid name, otherwise prefix and a digest of it. The same id
 * always gives the same name, so that a call made again after a restart
 * gets the decision already made instead of asking twice.
 */
export function nameFor(prefix: string, id: string): string {
  if (nameRule.test(id)) return id;
  return prefix + createHash("sha256").update(id).digest("hex").slice(0, 32);
}

/** The gate fields every adapter passes through: who asks, and what the approver and the rules see. */
export interface GateFields {
  /** The agent's name, shown to the approver and seen by gate rules. */
  agent?: string;
  conversationId?: string;
  /** Any object the gate rules may read. */
  context?: JsonObject;
  /** Echoed unchanged in every event of the call. */
  origin?: JsonObject;
}

/** The ToolCall of a tool's input, refused when the input is not an object. */
export function gateCall(fields: GateFields, callId: string, tool: string, input: unknown): ToolCall {
  if (!isObject(input)) {
    throw new ArgumentError(
      `the input of tool ${JSON.stringify(tool)} is ${JSON.stringify(input)}, not an object: the gate takes a tool's arguments as a JSON object; give the tool an object schema`,
    );
  }
  return {
    callId,
    tool,
    args: input,
    ...(fields.agent !== undefined && { agent: fields.agent }),
    ...(fields.conversationId !== undefined && { conversationId: fields.conversationId }),
    ...(fields.context !== undefined && { context: fields.context }),
    ...(fields.origin !== undefined && { origin: fields.origin }),
  };
}

/**
 * What the model reads when a tool call did not run: who refused it and
 * why, so that it can tell the user. For a responded call, the approver's
 * message; for a pending one, that it still waits.
 */
export function refusalText(tool: string, d: ToolDecision): string {
  const by = (approver: string | undefined) => (approver !== undefined && approver !== "" ? approver : "the approver");
  switch (d.decision) {
    case "rejected":
      return `${tool} was not run: ${by(d.approver)} rejected the call${d.reason ? `: ${d.reason}` : "."}`;
    case "responded":
      return `${tool} was not run: ${by(d.approver)} answered instead: ${d.message ?? d.reason ?? ""}`;
    case "expired":
      return `${tool} was not run: nobody approved the call in time${d.reason ? ` (${d.reason})` : ""}.`;
    case "pending":
      return `${tool} was not run: the call ${d.callId} still waits for a person's approval. Tell the user it is waiting for approval.`;
    default:
      return `${tool} may run (${d.decision}).`;
  }
}
