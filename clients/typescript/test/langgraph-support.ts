// The agent process of the LangGraph.js adapter's restart test: a refund
// graph on a checkpointer kept in a file, as an agent that outlives its
// process keeps its threads. Run as a script (node langgraph-support.js
// TRANSPORT start|resume THREAD FILE), it runs or resumes the thread
// through Interlock until it waits on an ask nobody answered yet, prints
// where it stands, and exits: the next process carries on.
import { readFileSync, writeFileSync } from "node:fs";
import { Annotation, END, MemorySaver, START, StateGraph, interrupt } from "@langchain/langgraph";
import type { RunnableConfig } from "@langchain/core/runnables";
import { resumeAnswered, runWithInterlock } from "../src/langgraph.js";
import { transports } from "./env.js";

export const State = Annotation.Root({
  orderId: Annotation<string>(),
  amount: Annotation<number>(),
  address: Annotation<string | undefined>(),
  plan: Annotation<string | undefined>(),
  refunded: Annotation<number | undefined>(),
  decision: Annotation<string | undefined>(),
  reason: Annotation<string | undefined>(),
});
type S = typeof State.State;

/** A refund graph: it asks where to ship, which plan, and a supervisor's approval of the refund. */
export function refundGraph(opts: { timeout?: string } = {}) {
  return new StateGraph(State)
    .addNode("ask_address", () => ({ address: interrupt<string, string>("Where should we ship the replacement?") }))
    .addNode("pick_plan", () => ({
      plan: interrupt<unknown, string>({ kind: "choice", question: "Which plan?", options: [{ id: "basic", label: "Basic" }, { id: "pro", label: "Pro" }] }),
    }))
    .addNode("approve_refund", (s: S) => {
      const d = interrupt<unknown, { decision: string; args?: { amount?: number }; reason?: string }>({
        kind: "approval",
        title: `Refund ${s.amount} on ${s.orderId}`,
        action: "issue_refund",
        args: { orderId: s.orderId, amount: s.amount },
        approverRole: "supervisor",
        ...(opts.timeout !== undefined && { timeout: opts.timeout }),
      });
      const ok = d.decision === "approve" || d.decision === "edit";
      return { refunded: ok ? (d.args?.amount ?? s.amount) : 0, decision: d.decision, ...(d.reason !== undefined && { reason: d.reason }) };
    })
    .addEdge(START, "ask_address")
    .addEdge("ask_address", "pick_plan")
    .addEdge("pick_plan", "approve_refund")
    .addEdge("approve_refund", END);
}

/**
 * A MemorySaver whose checkpoints live in a file: loaded when made, written
 * after every change. Enough for a test of a process restart; an agent in
 * production uses a database checkpointer.
 */
export class FileSaver extends MemorySaver {
  constructor(private readonly file: string) {
    super();
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      return;
    }
    const saved = JSON.parse(text, (_k, v: unknown) =>
      v !== null && typeof v === "object" && "$u8" in v ? new Uint8Array(Buffer.from((v as { $u8: string }).$u8, "base64")) : v,
    ) as { storage: MemorySaver["storage"]; writes: MemorySaver["writes"] };
    this.storage = saved.storage;
    this.writes = saved.writes;
  }
  private save(): void {
    const text = JSON.stringify({ storage: this.storage, writes: this.writes }, (_k, v: unknown) =>
      v instanceof Uint8Array ? { $u8: Buffer.from(v).toString("base64") } : v,
    );
    writeFileSync(this.file, text);
  }
  override async put(...args: Parameters<MemorySaver["put"]>): Promise<RunnableConfig> {
    const r = await super.put(...args);
    this.save();
    return r;
  }
  override async putWrites(...args: Parameters<MemorySaver["putWrites"]>): Promise<void> {
    await super.putWrites(...args);
    this.save();
  }
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const [name, stage, thread, file] = process.argv.slice(2);
  const tr = transports.find((t) => t.name === name);
  if (tr === undefined || (stage !== "start" && stage !== "resume") || thread === undefined || file === undefined) {
    throw new Error("usage: node langgraph-support.js nats|http start|resume THREAD FILE");
  }
  const c = await tr.connect();
  const graph = refundGraph().compile({ checkpointer: new FileSaver(file) });
  const config = { configurable: { thread_id: thread } };
  const opts = { agent: "langgraph-test", wait: 100 };
  const out = stage === "start" ? await runWithInterlock(c, graph, { orderId: "o-9", amount: 900 }, config, opts) : await resumeAnswered(c, graph, config, opts);
  process.stdout.write(JSON.stringify(out.done ? { done: true, values: out.values } : { done: false, pending: out.pending.map((p) => p.askId) }));
  await c.close();
}
