// What both transports do with a gate's decision before a tool may run:
// check it against the call and its receipt, and take the approval once.
import { toolDecision } from "./common.js";
import { ArgumentError, ReceiptError } from "./errors.js";
import { type TrustedKeys, argsDigest, verifyDecided } from "./receipt.js";
import type { Consumed, Decided, ToolCall, ToolDecision } from "./types.js";

/** Takes the approval of call callId for the args of digest, once. */
export type Take = (callId: string, digest: string) => Promise<Consumed>;

/**
 * The client's decision on call from the gate's decided data d: checked
 * against the call (and, when it lets the call run, its receipt, verified
 * with keys), then, approved or edited and when take is given, with the
 * approval taken; an allowed call has none to take. Throws a ReceiptError
 * when the decision does not hold, ApprovalTakenError (from take) when
 * the approval was taken already.
 */
export async function settleDecision(call: ToolCall & { callId: string }, d: Decided, keys: TrustedKeys, take: Take | undefined): Promise<ToolDecision> {
  const approved = d.decision === "approved" || d.decision === "edited";
  const runs = approved || d.decision === "allowed";
  const receipt = verifyDecided(
    { callId: call.callId, tool: call.tool, server: call.server, argsDigest: argsDigest(call.args) },
    d,
    runs ? await keys.for(d.receipt) : [],
  );
  const out = toolDecision(d, call.args);
  if (runs && out.decision !== "pending") {
    if (receipt !== undefined) Object.assign(out, { receipt });
    if (approved && take !== undefined) Object.assign(out, { consumed: await take(d.callId, d.finalDigest!) });
  }
  return out;
}

/**
 * Takes the approval of an approved or edited decision that
 * requestToolApproval returned without taking it, after checking it again:
 * its receipt states it, and its args are the ones approved.
 */
export async function takeDecision(d: ToolDecision, keys: TrustedKeys, take: Take): Promise<Consumed> {
  if (d.decision === "allowed") {
    throw new ArgumentError(`call ${d.callId} was allowed by the gate: it has no approval to take; run it with its args`);
  }
  if (d.decision !== "approved" && d.decision !== "edited") {
    throw new ArgumentError(`call ${d.callId} was ${d.decision}: only an approved or edited call's approval is taken, and this call may not run`);
  }
  const dd = d.decided;
  if (dd === undefined) throw new ArgumentError(`the decision on call ${d.callId} has no decided data: pass the decision requestToolApproval returned`);
  if (argsDigest(d.args) !== dd.finalDigest) {
    throw new ReceiptError("mismatch", `the args of the decision on call ${d.callId} were changed since it was decided: run exactly the args approved`);
  }
  verifyDecided({ callId: dd.callId, tool: dd.tool ?? "", server: dd.server, argsDigest: dd.argsDigest ?? "" }, dd, await keys.for(dd.receipt));
  return take(dd.callId, dd.finalDigest!);
}
