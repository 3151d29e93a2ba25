// The LangGraph.js adapter against a real Interlock: a graph's interrupt()s
// (a question, a choice, an approval) become asks, answered by the test in
// Interlock, and the thread is resumed with the answers by a new graph
// instance on the same checkpointer, and by new agent processes on a
// checkpointer kept in a file, as after a restart of the agent.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Annotation, END, MemorySaver, START, StateGraph, interrupt } from "@langchain/langgraph";
import type { Interlock, ResumeInput } from "../src/index.js";
import { askIdOf, askInterruptOf, askInterrupts, resumeAnswered, runWithInterlock } from "../src/langgraph.js";
import { ArgumentError, RefusedError } from "../src/index.js";
import { WAIT, eventually, id, interruptedOf, transports } from "./env.js";
import { type State, refundGraph } from "./langgraph-support.js";

type S = typeof State.State;

const run = promisify(execFile);
const agentProcess = fileURLToPath(new URL("./langgraph-support.js", import.meta.url));

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

    it("survives a restart of the agent process: each process carries the thread on from the asks' answers", async () => {
      const thread = id("t-");
      const file = join(mkdtempSync(join(tmpdir(), "langgraph-")), "checkpoints.json");
      const agent = async (stage: "start" | "resume") => {
        const { stdout } = await run(process.execPath, [agentProcess, tr.name, stage, thread, file], { timeout: WAIT });
        return JSON.parse(stdout) as { done: boolean; pending?: string[]; values?: unknown };
      };
      let out = await agent("start");
      assert.equal(out.done, false);
      // Another process before anyone answers: the same ask, not a second.
      assert.deepEqual((await agent("resume")).pending, out.pending);
      const answers: ResumeInput[] = [{ answers: { answer: "9 Harbour Lane, Ogdenville" } }, { selected: ["basic"] }, { decision: "approve", ...tr.approver }];
      const asked: string[] = [];
      for (const answer of answers) {
        const askId = out.pending?.[0];
        assert.ok(askId !== undefined && !asked.includes(askId), `the process asked ${JSON.stringify(out.pending)}, want one new ask`);
        asked.push(askId);
        await c.resume("ask", askId, answer, { wait: WAIT });
        // A new process: the answered ask resumes the thread, which asks
        // the next one (the same ask, not a second, if asked twice).
        out = await agent("resume");
      }
      assert.ok(out.done, `after the last answer: ${JSON.stringify(out)}`);
      assert.deepEqual(out.values, { orderId: "o-9", amount: 900, address: "9 Harbour Lane, Ogdenville", plan: "basic", refunded: 900, decision: "approve" });
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
