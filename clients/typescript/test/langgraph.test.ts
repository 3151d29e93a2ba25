// The LangGraph.js adapter against a real Interlock: a graph's interrupt()s
// (a question, a choice, an approval) become asks, answered by the test in
// Interlock, and the thread is resumed with the answers by a new graph
// instance on the same checkpointer, as after a restart of the agent.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Annotation, END, MemorySaver, START, StateGraph, interrupt } from "@langchain/langgraph";
import type { Interlock, ResumeInput } from "../src/index.js";
import { askIdOf, askInterruptOf, askInterrupts, resumeAnswered, runWithInterlock } from "../src/langgraph.js";
import { ArgumentError, RefusedError } from "../src/index.js";
import { WAIT, eventually, id, interruptedOf, transports } from "./env.js";

const State = Annotation.Root({
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
function refundGraph(opts: { timeout?: string } = {}) {
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

for (const tr of transports) {
  describe(`LangGraph interrupts as Interlock asks, over ${tr.name}`, () => {
    let c: Interlock;
    before(async () => {
      c = await tr.connect();
    });
    after(async () => {
      await c.close();
    });

    it("asks each interrupt, and a new graph on the same checkpointer resumes the thread with the answers", async () => {
      const saver = new MemorySaver();
      const config = { configurable: { thread_id: id("t-") } };
      const first = refundGraph().compile({ checkpointer: saver });
      let out = await runWithInterlock(c, first, { orderId: "o-1", amount: 900 }, config, { agent: "langgraph-test", wait: 100 });
      assert.equal(out.done, false);
      assert.ok(!out.done);
      const question = out.pending[0]!;
      assert.equal(out.pending.length, 1);
      assert.equal(question.outcome.status === "pending" && question.outcome.pending?.kind, "question");
      assert.equal(question.outcome.status === "pending" && question.outcome.pending?.questions?.[0].question, "Where should we ship the replacement?");
      // Asked again, the interrupt keeps its ask.
      const again = await askInterrupts(c, first, config);
      assert.deepEqual(again.map((a) => a.askId), [question.askId]);

      // The agent process stops; a person answers; the next process carries on.
      await c.resume("ask", question.askId, { answers: { answer: "1 Main Street, Springfield" } }, { wait: WAIT });
      const second = refundGraph().compile({ checkpointer: saver });
      out = await resumeAnswered(c, second, config, { wait: WAIT });
      assert.ok(!out.done);
      const choice = out.pending[0]!;
      assert.equal(choice.outcome.status === "pending" && choice.outcome.pending?.kind, "choice");
      await c.resume("ask", choice.askId, { selected: ["pro"] }, { wait: WAIT });

      out = await resumeAnswered(c, second, config, { wait: WAIT });
      assert.ok(!out.done);
      const approval = out.pending[0]!;
      assert.equal(approval.outcome.status === "pending" && approval.outcome.pending?.action, "issue_refund");
      await c.resume("ask", approval.askId, { decision: "edit", edits: { amount: 300 }, reason: "partial", ...tr.approver }, { wait: WAIT });

      out = await resumeAnswered(c, refundGraph().compile({ checkpointer: saver }), config, { wait: WAIT });
      assert.ok(out.done);
      assert.deepEqual(out.values, {
        orderId: "o-1",
        amount: 900,
        address: "1 Main Street, Springfield",
        plan: "pro",
        refunded: 300,
        decision: "edit",
        reason: "partial",
      });
    });

    it("waits for each answer and resumes by itself until the graph ends", async () => {
      const config = { configurable: { thread_id: id("t-") } };
      const graph = refundGraph().compile({ checkpointer: new MemorySaver() });
      const running = runWithInterlock(c, graph, { orderId: "o-2", amount: 700 }, config, { wait: WAIT });
      const answers: ResumeInput[] = [{ answers: { answer: "2 Side Road, Shelbyville" } }, { selected: ["basic"] }, { decision: "reject", reason: "refunded already", ...tr.approver }];
      for (const answer of answers) {
        // The ask of the interrupt the thread stops on now, once asked.
        const askId = await eventually("the thread's next interrupt", async () => {
          const ids = (await graph.getState(config)).tasks.flatMap((t) => t.interrupts.map((i) => i.id));
          return ids.length === 1 && ids[0] !== undefined ? askIdOf(config.configurable.thread_id, ids[0]) : undefined;
        });
        await interruptedOf(c, "ask", askId);
        await c.resume("ask", askId, answer, { wait: WAIT });
        await eventually(`the ask ${askId} answered and its interrupt resumed`, async () => {
          const ids = (await graph.getState(config)).tasks.flatMap((t) => t.interrupts.map((i) => i.id ?? ""));
          return ids.every((i) => askIdOf(config.configurable.thread_id, i) !== askId) ? true : undefined;
        });
      }
      const out = await running;
      assert.ok(out.done);
      assert.deepEqual(out.values, { orderId: "o-2", amount: 700, address: "2 Side Road, Shelbyville", plan: "basic", refunded: 0, decision: "reject", reason: "refunded already" });
    });

    it("resumes an approval nobody decided by its deadline as expired", async () => {
      const config = { configurable: { thread_id: id("t-") } };
      const graph = refundGraph({ timeout: "1s" }).compile({ checkpointer: new MemorySaver() });
      let out = await runWithInterlock(c, graph, { orderId: "o-3", amount: 800 }, config, { wait: 100 });
      assert.ok(!out.done);
      await c.resume("ask", out.pending[0]!.askId, { answers: { answer: "3 Elm Street, Capital City" } }, { wait: WAIT });
      out = await resumeAnswered(c, graph, config, { wait: WAIT });
      assert.ok(!out.done);
      await c.resume("ask", out.pending[0]!.askId, { selected: ["basic"] }, { wait: WAIT });
      out = await runWithInterlock(c, graph, undefined, config, { wait: WAIT });
      assert.ok(out.done);
      assert.equal((out.values as S).decision, "expired");
      assert.equal((out.values as S).refunded, 0);
    });
  });
}

describe("interrupt values as asks, over http", () => {
  it("refuses a value that is neither a string nor an ask's interrupt, saying what to give", () => {
    assert.throws(() => askInterruptOf({ id: "i-1", value: { amount: 3 } }), (err: unknown) => {
      assert.ok(err instanceof ArgumentError);
      assert.match(err.message, /give it a string \(a question\), or an ask's interrupt/);
      return true;
    });
  });

  it("asks a string with interrupt()'s responseSchema as the answer's schema, and resumes with the answer that fits it", async () => {
    const c = await transports[1]!.connect();
    const Count = Annotation.Root({ count: Annotation<number>() });
    const graph = new StateGraph(Count)
      .addNode("ask_count", () => ({ count: interrupt<string, number>("How many?", { responseSchema: { type: "integer", minimum: 1 } }) }))
      .addEdge(START, "ask_count")
      .addEdge("ask_count", END)
      .compile({ checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: id("t-") } };
    const out = await runWithInterlock(c, graph, { count: 0 }, config, { wait: 100 });
    assert.ok(!out.done);
    const asked = out.pending[0]!;
    assert.deepEqual(asked.outcome.status === "pending" && asked.outcome.pending?.questions?.[0].schema, { type: "integer", minimum: 1 });
    await assert.rejects(c.resume("ask", asked.askId, { answers: { answer: "three" } }, { wait: WAIT }), (err: unknown) => err instanceof RefusedError && err.code === "invalid_answer");
    await c.resume("ask", asked.askId, { answers: { answer: 3 } }, { wait: WAIT });
    const done = await runWithInterlock(c, graph, undefined, config, { wait: WAIT });
    assert.ok(done.done);
    assert.deepEqual(done.values, { count: 3 });
    await c.close();
  });
});
