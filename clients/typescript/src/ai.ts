// @interlockhq/client/ai: the Vercel AI SDK's tools through Interlock's
// gate. Each call the model makes goes to the gate first; the tool runs
// when the gate allows it or a person approves it, runs with the final
// args when a person edits them, and does not run when a person rejects
// it, answers instead, or nobody decides in time: the model reads who
// refused it and why, and can tell the user. A call runs only on a
// decision whose receipt verifies and states it (the gate's own for a
// call it allowed), and an approved call runs once, with the args its
// receipt states: a receipt that does not hold (ReceiptError) or an
// approval taken already (ApprovalTakenError) throws from execute, and
// the tool does not run.
//
//   const tools = gateTools(interlock, { issue_refund: tool({ inputSchema, execute }) }, { agent: "support" });
//   await generateText({ model, tools, prompt, stopWhen: stepCountIs(5) });
//
// Only types come from "ai": the tools stay the caller's own objects.
import type { Tool, ToolExecutionOptions } from "ai";
import { type GateFields, gateCall, nameFor, refusalText } from "./adapters.js";
import { ArgumentError } from "./errors.js";
import { type Interlock, type ToolDecision, mayRun } from "./types.js";

export { refusalText } from "./adapters.js";

/** The gate's wait for a person's decision by default: 5 minutes, the longest the HTTP API takes. */
export const DEFAULT_DECISION_WAIT = 5 * 60_000;

/** How gateTool and gateTools put calls through the gate. */
export interface GateToolOptions extends GateFields {
  /** How long a call waits for a person's decision, in milliseconds. Defaults to DEFAULT_DECISION_WAIT. */
  wait?: number;
  /**
   * The gate's callId of a tool call. Defaults to the model's toolCallId
   * (or a digest of it when it is not a valid name): a step run again with
   * the same toolCallId gets the decision already made, and an approval
   * already taken throws ApprovalTakenError instead of running twice.
   */
  callId?: (toolCallId: string) => string;
  /**
   * What the model reads when the call does not run (rejected, responded,
   * expired, or still pending after wait). Defaults to refusalText.
   */
  refusal?: (tool: string, d: ToolDecision) => unknown;
  /** Whether the approver sees the conversation (the messages the model read). Defaults to true. */
  sendMessages?: boolean;
}

/**
 * Returns tool with its execute behind the gate under the name tool, as
 * gate rules match it: allowed, approved and edited run execute with the
 * decided args, once their receipt verified (and, approved or edited,
 * once their approval was taken); anything else returns the refusal to
 * the model instead.
 */
export function gateTool<T extends Tool>(interlock: Interlock, name: string, tool: T, opts: GateToolOptions = {}): T {
  const execute = tool.execute;
  if (execute === undefined) {
    throw new ArgumentError(`tool ${JSON.stringify(name)} has no execute: only a tool the agent runs itself can be gated`);
  }
  const wait = opts.wait ?? DEFAULT_DECISION_WAIT;
  const refusal = opts.refusal ?? refusalText;
  return {
    ...tool,
    execute: async (input: unknown, options: ToolExecutionOptions) => {
      const callId = opts.callId ? opts.callId(options.toolCallId) : nameFor("call-", options.toolCallId);
      const call = gateCall(opts, callId, name, input);
      if (opts.sendMessages !== false && options.messages.length > 0) call.messages = options.messages;
      const d = await interlock.requestToolApproval(call, { wait });
      if (!mayRun(d)) return refusal(name, d);
      return execute(d.args as never, options);
    },
  } as T;
}

/** Returns tools with every one behind the gate (see gateTool), by its key as the tool's name. */
export function gateTools<TS extends Record<string, Tool>>(interlock: Interlock, tools: TS, opts: GateToolOptions = {}): TS {
  const gated: Record<string, Tool> = {};
  for (const [name, tool] of Object.entries(tools)) gated[name] = gateTool(interlock, name, tool, opts);
  return gated as TS;
}
