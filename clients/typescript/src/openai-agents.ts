// @interlockhq/client/openai-agents: the OpenAI Agents SDK's tool
// approvals decided in Interlock.
//
// withGate puts a function tool behind the gate: its needsApproval asks
// the gate, so that a call no rule stops runs at once and a call a rule
// stops becomes one of the run's interruptions; its execute runs the tool
// with the args the gate decided (an approver's edits included).
// settleInterruptions approves or rejects a run's interruptions by
// Interlock's decisions, the rejections with the approver's reason as what
// the model reads. Between the two, the run's state may be serialized and
// the process may stop: a new one loads the state, settles and resumes.
//
//   const refund = tool(withGate(interlock, { name: "issue_refund", description, parameters, execute }));
//   let result = await run(agent, "Refund order o-1");
//   const saved = result.state.toString();                  // the process may stop here
//   const state = await RunState.fromString(agent, saved);  // in the next one
//   await settleInterruptions(interlock, state, { wait: 300_000 });
//   result = await run(agent, state);
//
// Only types come from "@openai/agents": the tool stays the caller's own.
import type { RunToolApprovalItem } from "@openai/agents";
import { type GateFields, gateCall, nameFor, refusalText } from "./adapters.js";
import { ArgumentError } from "./errors.js";
import { type Interlock, type ToolDecision, mayRun } from "./types.js";

export { refusalText } from "./adapters.js";

/** How long needsApproval waits for the gate by default: enough for a rule to let the call through, in milliseconds. */
export const DEFAULT_APPROVAL_CHECK_WAIT = 2_000;
/** How long settleInterruptions, and execute, wait for a person's decision by default: 5 minutes. */
export const DEFAULT_DECISION_WAIT = 5 * 60_000;

/** How withGate puts a tool's calls through the gate. */
export interface WithGateOptions extends GateFields {
  /**
   * How long needsApproval waits for the gate's decision, in milliseconds.
   * A call not let through within it becomes an interruption. Defaults to
   * DEFAULT_APPROVAL_CHECK_WAIT.
   */
  checkWait?: number;
  /** How long execute waits for a decision not made yet. Defaults to DEFAULT_DECISION_WAIT. */
  wait?: number;
}

/** The details the SDK passes to a tool's execute: the model's call, with its id. */
interface CallDetails {
  toolCall?: { callId?: string };
}

/** What withGate needs of a tool's options: a name (gate rules match it) and an execute. */
export interface GatableTool {
  name: string;
  execute: (input: any, context?: any, details?: any) => unknown;
}

/**
 * Returns the options of a function tool (for the SDK's tool()) with
 * needsApproval and execute backed by Interlock's gate, under the tool's
 * name. A call the gate allows (no rule fires) or a person approves at
 * once needs no approval in the SDK; any other becomes an interruption, to
 * settle with settleInterruptions. execute runs the tool with the decided
 * args, once: an allowed call only when the gate's receipt holds, an
 * approved or edited one only when its receipt holds and its approval is
 * taken there (else it throws ReceiptError or ApprovalTakenError, and the
 * tool does not run); should a call reach it that the gate did not let
 * through, it returns the refusal to the model instead.
 */
export function withGate<T extends GatableTool>(interlock: Interlock, options: T, opts: WithGateOptions = {}): T & {
  needsApproval: (runContext: unknown, input: unknown, callId?: string) => Promise<boolean>;
} {
  const { name, execute } = options;
  if (typeof name !== "string" || name === "") {
    throw new ArgumentError("withGate needs the tool's name: gate rules match calls by it; set name in the tool's options");
  }
  const checkWait = opts.checkWait ?? DEFAULT_APPROVAL_CHECK_WAIT;
  const wait = opts.wait ?? DEFAULT_DECISION_WAIT;
  return {
    ...options,
    needsApproval: async (_runContext: unknown, input: unknown, callId?: string): Promise<boolean> => {
      if (callId === undefined) return true; // nothing to name the call by: let settleInterruptions ask
      // Only a look: execute takes the approval when it runs the tool.
      const d = await interlock.requestToolApproval(gateCall(opts, nameFor("call-", callId), name, input), { wait: checkWait, take: false });
      return !mayRun(d);
    },
    execute: async (input: unknown, context?: unknown, details?: CallDetails) => {
      const callId = details?.toolCall?.callId;
      if (callId === undefined) {
        throw new ArgumentError(`tool ${JSON.stringify(name)} ran without the model's call id: run it through the SDK's Runner, which passes it`);
      }
      const d = await interlock.requestToolApproval(gateCall(opts, nameFor("call-", callId), name, input), { wait });
      if (!mayRun(d)) return refusalText(name, d);
      return execute(d.args, context, details);
    },
  };
}

/** What settleInterruptions needs of a RunState. */
export interface ApprovalState {
  getInterruptions(): RunToolApprovalItem[];
  approve(item: RunToolApprovalItem, options?: { alwaysApprove?: boolean }): void;
  reject(item: RunToolApprovalItem, options?: { alwaysReject?: boolean; message?: string }): void;
}

/** One interruption and Interlock's decision on it. */
export interface Settled {
  item: RunToolApprovalItem;
  decision: ToolDecision;
}

/** What settleInterruptions did. */
export interface Settlement {
  /** Approved in the state: allowed, approved or edited in Interlock. */
  approved: Settled[];
  /** Rejected in the state, with the refusal as the model's message: rejected, responded or expired. */
  rejected: Settled[];
  /** Left as they were: nobody decided within wait (decision pending), or not a function call. */
  pending: Settled[];
}

/** Options of settleInterruptions. */
export interface SettleOptions extends GateFields {
  /** How long to wait for people's decisions, in milliseconds. Defaults to DEFAULT_DECISION_WAIT. */
  wait?: number;
  /** What the model reads of a rejected call. Defaults to refusalText. */
  refusal?: (tool: string, d: ToolDecision) => string;
}

/**
 * Settles state's interruptions by Interlock's decisions: waits (up to
 * wait, all at once) for the gate's decision on each function call that
 * waits for approval, then approves it in state when Interlock let it run,
 * and rejects it with the approver's reason when not. Calls still pending
 * are left for a later call. Run the agent with state afterwards.
 */
export async function settleInterruptions(interlock: Interlock, state: ApprovalState, opts: SettleOptions = {}): Promise<Settlement> {
  const wait = opts.wait ?? DEFAULT_DECISION_WAIT;
  const refusal = opts.refusal ?? refusalText;
  const out: Settlement = { approved: [], rejected: [], pending: [] };
  await Promise.all(
    state.getInterruptions().map(async (item) => {
      const raw = item.rawItem;
      const tool = item.name ?? "";
      if (raw.type !== "function_call") {
        out.pending.push({ item, decision: { callId: "", decision: "pending" } });
        return;
      }
      let args: unknown;
      try {
        args = JSON.parse(raw.arguments);
      } catch (err) {
        throw new ArgumentError(`the arguments of the call ${raw.callId} of ${tool} are not JSON (${(err as Error).message}): the model's call cannot be put through the gate`);
      }
      // The tool's execute takes the approval when the run carries on.
      const d = await interlock.requestToolApproval(gateCall(opts, nameFor("call-", raw.callId), tool, args), { wait, take: false });
      if (mayRun(d)) {
        state.approve(item);
        out.approved.push({ item, decision: d });
      } else if (d.decision === "pending") {
        out.pending.push({ item, decision: d });
      } else {
        state.reject(item, { message: refusal(tool, d) });
        out.rejected.push({ item, decision: d });
      }
    }),
  );
  return out;
}
