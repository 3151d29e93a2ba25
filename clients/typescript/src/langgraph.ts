// @interlockhq/client/langgraph: a LangGraph.js graph's interrupt()s put
// to people as Interlock asks (the inbox, Slack, e-mail, deadlines and
// audit come with them), and the thread resumed with Command({resume})
// once they are answered.
//
// Each pending interrupt of the thread becomes one ask, whose askId comes
// from the thread and the interrupt's id: asked again (by the same process
// or by the next one, after a restart, on the same checkpointer), it is
// the same ask, never a second one.
//
//   const config = { configurable: { thread_id: "t-1" } };
//   const out = await runWithInterlock(interlock, graph, { orderId: "o-1" }, config, { wait: 300_000 });
//   // out.done: the graph finished (out.values); otherwise out.pending: the asks it waits on.
//   // After a restart, carry on where the thread stopped:
//   await runWithInterlock(interlock, graph, undefined, config, { wait: 300_000 });
//
// An interrupt's value is the question: a string (asked as a question
// whose answer, a string, or one fitting interrupt()'s responseSchema,
// resumes it), or an ask's interrupt, {kind: "question" | "choice" |
// "approval", ...} (docs/schema/ask-requested.json).
import { createHash } from "node:crypto";
import { Command } from "@langchain/langgraph";
import { KINDS, isObject } from "./common.js";
import { ArgumentError } from "./errors.js";
import type { Answered, AskInterrupt, AskOutcome, AskRequest, Interlock, JsonObject } from "./types.js";

/** How long runWithInterlock and resumeAnswered wait for answers by default: 5 minutes. */
export const DEFAULT_ANSWER_WAIT = 5 * 60_000;

/** A LangGraph interrupt, as the thread's state lists it. */
export interface GraphInterrupt {
  id?: string;
  value?: unknown;
  response_schema?: unknown;
}

/** What the adapter needs of a compiled graph: invoke and getState. */
export interface InterruptibleGraph {
  invoke(input: any, config?: any): Promise<unknown>;
  getState(config: any): Promise<{ values: unknown; tasks: ReadonlyArray<{ interrupts: ReadonlyArray<GraphInterrupt> }> }>;
}

/** The graph's config: the thread it runs. */
export interface ThreadConfig {
  configurable: { thread_id: string; [key: string]: unknown };
  [key: string]: unknown;
}

/** How interrupts become asks, and answers resume values. */
export interface AskOptions {
  /** Who asks, shown to the people asked. */
  agent?: string;
  /** Defaults to the thread's id. */
  conversationId?: string;
  /** Any object, kept with each ask. */
  context?: JsonObject;
  /** Echoed unchanged in every event of each ask. */
  origin?: JsonObject;
  /** POSTed each ask's answered data when it settles. */
  callbackUrl?: string;
  /** Builds the ask's interrupt from an interrupt's value. Defaults to askInterruptOf. */
  toAsk?: (interrupt: GraphInterrupt) => AskInterrupt;
  /** The value an answer resumes the interrupt with. Defaults to resumeValueOf. */
  toResume?: (answered: Answered, interrupt: GraphInterrupt) => unknown;
}

/** Options of the calls that wait for answers. */
export interface WaitAskOptions extends AskOptions {
  /** How long to wait for the answers, in milliseconds. Defaults to DEFAULT_ANSWER_WAIT. */
  wait?: number;
}

/** One pending interrupt of the thread and its ask. */
export interface InterruptAsk {
  interrupt: GraphInterrupt;
  askId: string;
  outcome: AskOutcome;
}

/** Where runWithInterlock stopped: the graph finished, or it waits on asks nobody answered within wait. */
export type GraphOutcome = { done: true; values: unknown } | { done: false; pending: InterruptAsk[] };

/** The field a string interrupt's question is asked under. */
export const ANSWER_FIELD = "answer";

const kinds = new Set<string>(KINDS);

/**
 * The ask's interrupt for an interrupt's value: a string is one question
 * (field "answer", with interrupt()'s responseSchema as its schema); an
 * object with kind question, choice or approval is the ask's interrupt as
 * it is.
 */
export function askInterruptOf(i: GraphInterrupt): AskInterrupt {
  const v = i.value;
  if (typeof v === "string") {
    return {
      kind: "question",
      questions: [{ field: ANSWER_FIELD, question: v, ...(isObject(i.response_schema) && { schema: i.response_schema }) }],
    } as AskInterrupt;
  }
  if (isObject(v) && typeof v.kind === "string" && kinds.has(v.kind)) return v as AskInterrupt;
  throw new ArgumentError(
    `interrupt() was given ${JSON.stringify(v)}: give it a string (a question), or an ask's interrupt ({kind: "question" | "choice" | "approval", ...}, docs/schema/ask-requested.json), or pass toAsk to build one`,
  );
}

/**
 * The value an answered ask resumes its interrupt with: a string
 * interrupt's answer; a question's answers by field; a choice's option id
 * (the list of ids when multiple); an approval's {decision, args, approver,
 * reason, message}. An ask that expired or was cancelled resumes a string
 * interrupt, a question or a choice with null, and an approval with
 * {decision: "expired" | "cancelled"}.
 */
export function resumeValueOf(a: Answered, i: GraphInterrupt): unknown {
  const settled = a.status === "answered";
  if (a.kind === "approval") {
    const { decision, args, approver, reason, message } = a;
    return settled ? { decision, args, approver, reason, message } : { decision: a.status };
  }
  if (!settled) return null;
  if (a.kind === "choice") {
    const multiple = isObject(i.value) && i.value.multiple === true;
    return multiple ? (a.selected ?? []) : (a.selected?.[0] ?? null);
  }
  if (typeof i.value === "string") return a.answers?.[ANSWER_FIELD] ?? null;
  return a.answers ?? {};
}

/** The askId of an interrupt of a thread: the same for both, always. */
export function askIdOf(threadId: string, interruptId: string): string {
  return "lg-" + createHash("sha256").update(`${threadId}\u0000${interruptId}`).digest("hex").slice(0, 32);
}

function threadOf(config: ThreadConfig): string {
  const t = config?.configurable?.thread_id;
  if (typeof t !== "string" || t === "") {
    throw new ArgumentError("the graph's config has no configurable.thread_id: give the thread an id, and the graph a checkpointer, so that it can be resumed");
  }
  return t;
}

async function pendingInterrupts(graph: InterruptibleGraph, config: ThreadConfig): Promise<GraphInterrupt[]> {
  const state = await graph.getState(config);
  return state.tasks.flatMap((t) => t.interrupts);
}

/**
 * Puts each pending interrupt of the thread to people as an ask (once:
 * an interrupt already asked keeps its ask) and returns them, without
 * waiting for answers.
 */
export async function askInterrupts(interlock: Interlock, graph: InterruptibleGraph, config: ThreadConfig, opts: AskOptions = {}): Promise<InterruptAsk[]> {
  const thread = threadOf(config);
  const toAsk = opts.toAsk ?? askInterruptOf;
  const interrupts = await pendingInterrupts(graph, config);
  return Promise.all(
    interrupts.map(async (interrupt) => {
      if (interrupt.id === undefined) {
        throw new ArgumentError("an interrupt of the thread has no id: use @langchain/langgraph 1 or later, whose interrupts have one");
      }
      const askId = askIdOf(thread, interrupt.id);
      const request: AskRequest = {
        askId,
        conversationId: opts.conversationId ?? thread,
        interrupt: toAsk(interrupt),
        ...(opts.agent !== undefined && { agent: opts.agent }),
        ...(opts.context !== undefined && { context: opts.context }),
        ...(opts.origin !== undefined && { origin: opts.origin }),
        ...(opts.callbackUrl !== undefined && { callbackUrl: opts.callbackUrl }),
      };
      return { interrupt, askId, outcome: await interlock.ask(request) };
    }),
  );
}

/**
 * Asks the thread's pending interrupts, waits up to wait for every answer
 * and resumes the thread with them in one Command({resume}). Returns
 * whether it resumed; the asks still unanswered when it did not.
 */
async function settle(interlock: Interlock, graph: InterruptibleGraph, config: ThreadConfig, opts: WaitAskOptions): Promise<InterruptAsk[] | "resumed" | "none"> {
  const wait = opts.wait ?? DEFAULT_ANSWER_WAIT;
  const toResume = opts.toResume ?? resumeValueOf;
  const asks = await askInterrupts(interlock, graph, config, opts);
  if (asks.length === 0) return "none";
  const settled = await Promise.all(
    asks.map(async (a) => (a.outcome.status === "pending" ? { ...a, outcome: await interlock.waitForAsk(a.askId, { wait }) } : a)),
  );
  const unanswered = settled.filter((a) => a.outcome.status === "pending");
  if (unanswered.length > 0) return unanswered;
  const values = settled.map((a) => toResume(a.outcome as Answered, a.interrupt));
  const resume = settled.length === 1 ? values[0] : Object.fromEntries(settled.map((a, n) => [a.interrupt.id, values[n]]));
  await graph.invoke(new Command({ resume }), config);
  return "resumed";
}

async function outcome(interlock: Interlock, graph: InterruptibleGraph, config: ThreadConfig, opts: AskOptions): Promise<GraphOutcome> {
  const asks = await askInterrupts(interlock, graph, config, opts);
  if (asks.length > 0) return { done: false, pending: asks };
  return { done: true, values: (await graph.getState(config)).values };
}

/**
 * Asks the thread's pending interrupts (see askInterrupts), waits up to
 * wait for every answer, and resumes the thread with them in one
 * Command({resume}). Returns the graph's final values, or the asks it
 * waits on: the same ones when some are unanswered (the thread is left as
 * it was), or those of the interrupts it stopped on next.
 */
export async function resumeAnswered(interlock: Interlock, graph: InterruptibleGraph, config: ThreadConfig, opts: WaitAskOptions = {}): Promise<GraphOutcome> {
  const r = await settle(interlock, graph, config, opts);
  if (Array.isArray(r)) return { done: false, pending: r };
  return outcome(interlock, graph, config, opts);
}

/**
 * Runs the graph on the thread with input (undefined: carry on where the
 * thread stopped, as a restarted process does), and while it stops on
 * interrupts, asks them in Interlock, waits up to wait for the answers and
 * resumes. Returns the graph's final values, or the asks it still waits on
 * after wait.
 */
export async function runWithInterlock(
  interlock: Interlock,
  graph: InterruptibleGraph,
  input: unknown,
  config: ThreadConfig,
  opts: WaitAskOptions = {},
): Promise<GraphOutcome> {
  threadOf(config);
  if (input !== undefined) await graph.invoke(input, config);
  for (;;) {
    const r = await settle(interlock, graph, config, opts);
    if (Array.isArray(r)) return { done: false, pending: r };
    if (r === "none") return { done: true, values: (await graph.getState(config)).values };
  }
}
