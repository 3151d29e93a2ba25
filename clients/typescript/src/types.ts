// The client's API: what each call takes and returns, on both transports.
// Payloads are the generated types of docs/schema (src/generated).
import type * as schema from "./generated/schema.js";
import type { Receipt } from "./receipt.js";

export type { schema };

/** A JSON object. */
export type JsonObject = { [key: string]: unknown };

/** The data of an interrupted event: what a run, a gated call or an ask waits on. */
export type Interrupted = schema.Interrupted;

/** An interrupt's kind: question, choice or approval. */
export type Kind = schema.Interrupted["kind"];
/** A pending index entry (docs/schema/pending.json). */
export type PendingEntry = schema.PendingIndexEntry;
/** The data of a gate's decided event. */
export type Decided = schema.Decided;
/** The data of a gate's consumed event: an approval taken, to run its call once. */
export type Consumed = schema.Consumed;
/** The data of an ask's answered event. */
export type Answered = schema.Answered;
/** An ask as sent (docs/schema/ask-requested.json); askId may be left out. */
export type AskRequest = Omit<schema.AskRequested, "askId"> & { askId?: string };
/** What an ask puts in front of people. */
export type AskInterrupt = schema.AskRequested["interrupt"];

/** How long a call waits, in milliseconds. */
export type Wait = number;

/** A tool call to put through the gate (docs/schema/tool-requested.json). */
export interface ToolCall {
  /** Names the call; a fresh one (call- and 16 hex digits) when absent. Send the same one again to wait again. */
  callId?: string;
  /** The tool's name, which gate rules match on. */
  tool: string;
  /** The server offering the tool, when there are several (gate rules may match it, and the decision binds it). */
  server?: string;
  /** The call's arguments. */
  args?: JsonObject;
  agent?: string;
  conversationId?: string;
  /** The conversation so far, shown to the approver. */
  messages?: unknown[];
  /** Any object the gate rules may read. */
  context?: JsonObject;
  /** Echoed unchanged in every event of the call. */
  origin?: JsonObject;
}

/**
 * The gate's answer. decision says what to do: allowed, approved and edited
 * run the tool with args (the requested args, or for edited the final ones);
 * rejected, responded and expired do not run it (reason, message say why).
 * pending: no one decided within the wait; ask again with the same callId.
 * An allowed, approved or edited decision comes only once its receipt
 * verified and stated exactly it (receipt); an approved or edited one,
 * unless asked not to, once its approval was taken (consumed): args then
 * run once.
 */
export type ToolDecision =
  | {
      callId: string;
      decision: "allowed" | "approved" | "edited";
      /** The args to run the tool with. */
      args: JsonObject;
      approver?: string;
      reason?: string;
      rule?: string;
      decided?: Decided;
      /** What the decision's receipt states, verified: the gate's for allowed, the approval's for approved and edited. */
      receipt?: Receipt;
      /** approved and edited: the approval, taken to run the call once (absent with take: false). */
      consumed?: Consumed;
    }
  | {
      callId: string;
      decision: "rejected" | "responded" | "expired";
      approver?: string;
      reason?: string;
      /** With responded: the approver's answer to the agent. */
      message?: string;
      rule?: string;
      decided?: Decided;
    }
  | {
      callId: string;
      decision: "pending";
      /** The approval the call waits on (absent when nothing was announced within the wait). */
      pending?: Interrupted;
    };

/** Reports whether the gate lets the call run: allowed, approved or edited. */
export function mayRun(d: ToolDecision): d is Extract<ToolDecision, { decision: "allowed" | "approved" | "edited" }> {
  return d.decision === "allowed" || d.decision === "approved" || d.decision === "edited";
}

/**
 * What became of an ask: answered (or expired, cancelled), with the
 * answered event's data; or pending, with the interrupt it waits on.
 */
export type AskOutcome =
  | (Answered & { status: "answered" | "expired" | "cancelled" })
  | { askId: string; status: "pending"; pending?: Interrupted };

/** The outcome of a start or a resume (docs/http.md, Commands and their outcome). */
export interface RunOutcome {
  flow: string;
  run: string;
  /**
   * interrupted, completed, failed, cancelled, expired: the event that
   * settled the command. queued: nothing came within the wait (the command
   * is queued; follow it with watch). repeat: a resume with an idempotency
   * key the run has already applied.
   */
  outcome: "interrupted" | "completed" | "failed" | "cancelled" | "expired" | "queued" | "repeat" | "assigned";
  /** The event that settled the command. */
  event?: InterlockEvent;
}

/** A resume (docs/schema/resume.json) without the token: the client finds it (NATS) or needs none (HTTP). */
export type ResumeInput = Omit<schema.Resume, "resumeToken">;

/** Options of a start. */
export interface StartOptions {
  /** The run id; a fresh one when absent. */
  run?: string;
  /** The initial state. */
  state?: JsonObject;
  /** Echoed unchanged in every event of the run. */
  origin?: JsonObject;
  /** How long to wait for the outcome. Defaults to 10 s. */
  wait?: Wait;
}

/** Options of a call that waits. */
export interface WaitOptions {
  wait?: Wait;
}

/** Options of requestToolApproval. */
export interface ToolApprovalOptions extends WaitOptions {
  /**
   * Whether an approved or edited call's approval is taken before the
   * decision is returned, so that the call runs once (a second request of
   * the same callId then throws ApprovalTakenError). Defaults to true.
   * false only looks (the receipt is still verified): for a step that
   * decides whether to ask (an SDK's needsApproval) when another step runs
   * the tool, and takes the approval there (takeApproval, or
   * requestToolApproval again).
   */
  take?: boolean;
}

/** The data of each kind of event. */
export interface EventData {
  started: schema.Started;
  interrupted: schema.Interrupted;
  resumed: schema.Resumed;
  completed: schema.Completed;
  failed: schema.Failed;
  cancelled: schema.Cancelled;
  expired: schema.Expired;
  refused: schema.Refused;
  decided: schema.Decided;
  answered: schema.Answered;
  assigned: schema.Assigned;
  voted: schema.Voted;
  reminded: schema.Reminded;
}

/** An event kind. */
export type EventKind = keyof EventData;

/** A CloudEvent in structured mode, as Interlock publishes it. */
export interface CloudEvent<D = unknown> {
  specversion: "1.0";
  id: string;
  source: string;
  type: string;
  subject?: string;
  time?: string;
  datacontenttype?: string;
  flow?: string;
  traceparent?: string;
  data: D;
  [extension: string]: unknown;
}

/** An event of the events stream, typed by its kind. */
export type InterlockEvent = {
  [K in EventKind]: {
    /** The event's sequence in the events stream: watch from it with after. */
    seq: number;
    kind: K;
    flow: string;
    run: string;
    data: EventData[K];
    cloudEvent: CloudEvent<EventData[K]>;
  };
}[EventKind];

/** Which events watch follows. */
export interface WatchQuery {
  flow?: string;
  /** Needs flow. */
  run?: string;
  kinds?: EventKind[];
  /**
   * The seq of the last event already seen: watch starts after it. Absent:
   * from now on. 0: from the oldest event the stream holds.
   */
  after?: number;
}

/** Options of watch. */
export interface WatchOptions {
  /** Ends the watch. */
  signal?: AbortSignal;
  /**
   * Called once, when the watch is in place (it starts with the first
   * next()): every event stored from then on comes through it. A program
   * that says it is ready, or publishes what it watches for, waits for it.
   */
  onReady?: () => void;
}

/** Which pending interrupts listPending returns. */
export interface PendingQuery {
  flow?: string;
  kind?: Kind | Kind[];
  /** Only approvals for these approver roles. */
  role?: string | string[];
  /** 1 to 1000. Defaults to 50. */
  limit?: number;
  /** The next of the previous page. */
  cursor?: string;
}

/** A page of pending interrupts, oldest first. */
export interface PendingPage {
  items: PendingEntry[];
  /** The cursor of the next page; absent on the last. */
  next?: string;
  /** How many wait (HTTP, without kind or role filters). */
  total?: number;
}

/** Interlock, over NATS or HTTP. */
export interface Interlock {
  /**
   * Puts a tool call through the gate and waits (30 s by default) for the
   * decision. An approved or edited one is returned only once its receipt
   * verified with the deployment's audit keys (or those pinned) and states
   * exactly this call and decision, and once its approval was taken: run
   * the tool with the decision's args, once. A receipt that does not hold
   * throws ReceiptError, an approval taken already ApprovalTakenError:
   * then run nothing.
   */
  requestToolApproval(call: ToolCall, opts?: ToolApprovalOptions): Promise<ToolDecision>;
  /**
   * Takes the approval of an approved or edited decision (one returned with
   * take: false), after checking its receipt again: call it just before
   * running the tool with d.args. Throws ApprovalTakenError when it was
   * taken already, ReceiptError when the receipt does not hold.
   */
  takeApproval(d: ToolDecision): Promise<Consumed>;
  /**
   * Puts one interrupt in front of people. Without wait it returns once the
   * interrupt is announced (pending); with wait it waits that long for the answer.
   */
  ask(request: AskRequest, opts?: WaitOptions): Promise<AskOutcome>;
  /** Waits up to wait for an ask to settle. */
  waitForAsk(askId: string, opts: { wait: Wait }): Promise<AskOutcome>;
  /** Starts a run of a flow and waits for its outcome. */
  start(flow: string, opts?: StartOptions): Promise<RunOutcome>;
  /** Answers or decides a run's pending interrupt and waits for the outcome. */
  resume(flow: string, run: string, resume: ResumeInput, opts?: WaitOptions): Promise<RunOutcome>;
  /** Follows the events stream: every matching event once, in order, until the signal aborts. */
  watch(query?: WatchQuery, opts?: WatchOptions): AsyncIterableIterator<InterlockEvent>;
  /** A page of the pending interrupts. */
  listPending(query?: PendingQuery): Promise<PendingPage>;
  /** Closes the connection (NATS); a no-op over HTTP. */
  close(): Promise<void>;
}
