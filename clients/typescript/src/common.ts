// What both transports share: names, ids, and turning the protocol's
// answers into the client's results.
import { randomBytes } from "node:crypto";
import { ArgumentError } from "./errors.js";
import type {
  AskOutcome,
  Answered,
  CloudEvent,
  Decided,
  EventKind,
  Interrupted,
  InterlockEvent,
  JsonObject,
  Kind,
  ToolDecision,
} from "./types.js";

// Every kind the schemas name, and no other: tsc refuses this object when
// docs/schema/defs.json gains or loses a kind.
const kindSet: Record<Kind, true> = { question: true, choice: true, approval: true };

/** The interrupt kinds, as docs/schema/defs.json names them. */
export const KINDS = Object.keys(kindSet) as Kind[];

/** Default waits, in milliseconds. */
export const DEFAULT_GATE_WAIT = 30_000;
export const DEFAULT_WAIT = 10_000;
/** The longest wait the HTTP API takes. */
export const MAX_WAIT = 5 * 60_000;

const nameRule = /^[A-Za-z0-9_-]{1,128}$/;

/** Checks a flow name, run id, call id or ask id (docs/protocol.md §1). */
export function checkName(what: string, s: unknown): string {
  if (typeof s !== "string" || !nameRule.test(s)) {
    throw new ArgumentError(
      `${what} ${JSON.stringify(s)} is not a valid name: use 1 to 128 of A-Z a-z 0-9 _ - (it is a NATS subject token)`,
    );
  }
  return s;
}

/** Checks a wait, in milliseconds. */
export function checkWait(wait: number | undefined, fallback: number): number {
  if (wait === undefined) return fallback;
  if (!Number.isFinite(wait) || wait <= 0 || wait > MAX_WAIT) {
    throw new ArgumentError(`wait ${wait} is out of range: give milliseconds, more than 0 and at most ${MAX_WAIT} (5 minutes)`);
  }
  return Math.ceil(wait);
}

/** A Go duration of ms milliseconds, for ?wait=. */
export function goDuration(ms: number): string {
  return `${Math.ceil(ms)}ms`;
}

/** Seconds, for messages: "30s", "1.5s". */
export function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10}s`;
}

/** A fresh id with prefix: "call-" and 16 hex digits. */
export function newId(prefix: string): string {
  return prefix + randomBytes(8).toString("hex");
}

/**
 * The gate's decided data as the client's decision: allowed runs the
 * requested args; approved and edited the decision's own (checked against
 * its receipt before this is called).
 */
export function toolDecision(d: Decided, requested: JsonObject | undefined): ToolDecision {
  const common = {
    callId: d.callId,
    ...(d.approver !== undefined && { approver: d.approver }),
    ...(d.reason !== undefined && { reason: d.reason }),
    ...(d.rule !== undefined && { rule: d.rule }),
    decided: d,
  };
  switch (d.decision) {
    case "allowed":
    case "approved":
    case "edited":
      return { ...common, decision: d.decision, args: d.decision === "allowed" ? (requested ?? {}) : ((d.args as JsonObject | undefined) ?? {}) };
    default:
      return { ...common, decision: d.decision, ...(d.message !== undefined && { message: d.message }) };
  }
}

/** A gate call still waiting. */
export function toolPending(callId: string, pending: Interrupted | undefined): ToolDecision {
  return pending === undefined ? { callId, decision: "pending" } : { callId, decision: "pending", pending };
}

/** The answered data as the client's outcome. */
export function askAnswered(a: Answered): AskOutcome {
  return a as AskOutcome;
}

/** An ask still waiting. */
export function askPending(askId: string, pending: Interrupted | undefined): AskOutcome {
  return pending === undefined ? { askId, status: "pending" } : { askId, status: "pending", pending };
}

/** The kind of an event: its subject's last token. */
export function kindOf(subject: string): string {
  return subject.slice(subject.lastIndexOf(".") + 1);
}

/** An event of the stream, typed by kind, from its CloudEvent. */
export function toEvent(seq: number, kind: string, ce: CloudEvent): InterlockEvent {
  const data = (ce.data ?? {}) as { flow?: string; run?: string };
  return {
    seq,
    kind: kind as EventKind,
    flow: typeof ce.flow === "string" ? ce.flow : (data.flow ?? ""),
    run: ce.subject ?? data.run ?? "",
    data: ce.data,
    cloudEvent: ce,
  } as InterlockEvent;
}

/** Reports whether v is a JSON object. */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
