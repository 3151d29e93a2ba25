// The client against a real Interlock, on both transports: the gate, asks,
// runs, watching and the pending list.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { RefusedError, mayRun, type AskOutcome, type Interlock, type InterlockEvent } from "../src/index.js";
import { WAIT, id, pendingOf, transports } from "./env.js";

for (const tr of transports) {
  describe(`over ${tr.name}`, () => {
    let c: Interlock;
    before(async () => {
      c = await tr.connect();
    });
    after(async () => {
      await c.close();
    });

    it("lets a tool call no gate rule stops run at once, with its args", async () => {
      const args = { orderId: "o-1", amount: 120, currency: "USD" };
      const d = await c.requestToolApproval({ tool: "issue_refund", args, agent: "ts-test" }, { wait: WAIT });
      assert.equal(d.decision, "allowed");
      assert.ok(mayRun(d));
      assert.deepEqual(d.args, args);
    });

    it("returns a gated call pending, then the approval a person gave, to a repeat of the same callId", async () => {
      const callId = id("call-");
      const args = { orderId: "o-2", amount: 900, currency: "USD" };
      const first = await c.requestToolApproval({ callId, tool: "issue_refund", args }, { wait: 300 });
      assert.equal(first.decision, "pending", `the first answer was ${JSON.stringify(first)}`);
      if (first.decision === "pending") {
        await pendingOf(c, "gate", callId);
      }
      const out = await c.resume("gate", callId, { decision: "approve", reason: "checked the order", ...tr.approver }, { wait: WAIT });
      assert.equal(out.outcome, "completed");
      const d = await c.requestToolApproval({ callId, tool: "issue_refund", args }, { wait: WAIT });
      assert.equal(d.decision, "approved");
      assert.ok(mayRun(d));
      assert.deepEqual(d.args, args, "an approved call runs with the requested args");
      assert.equal(d.approver, tr.decidedBy);
    });

    it("waits for a gated call's edit, and gives the edited args", async () => {
      const callId = id("call-");
      const waiting = c.requestToolApproval({ callId, tool: "issue_refund", args: { orderId: "o-3", amount: 1200, currency: "USD" } }, { wait: WAIT });
      await pendingOf(c, "gate", callId);
      await c.resume("gate", callId, { decision: "edit", edits: { amount: 1000 }, reason: "capped", ...tr.approver }, { wait: WAIT });
      const d = await waiting;
      assert.equal(d.decision, "edited");
      assert.ok(mayRun(d));
      assert.deepEqual(d.args, { orderId: "o-3", amount: 1000, currency: "USD" });
    });

    it("waits for a gated call's rejection, with the approver and the reason", async () => {
      const callId = id("call-");
      const waiting = c.requestToolApproval({ callId, tool: "issue_refund", args: { orderId: "o-4", amount: 9000 } }, { wait: WAIT });
      await pendingOf(c, "gate", callId);
      await c.resume("gate", callId, { decision: "reject", reason: "too large for a refund", ...tr.approver }, { wait: WAIT });
      const d = await waiting;
      assert.equal(d.decision, "rejected");
      assert.ok(!mayRun(d));
      if (d.decision === "rejected") {
        assert.equal(d.reason, "too large for a refund");
        assert.equal(d.approver, tr.decidedBy);
      }
    });

    it("refuses an answer that does not fit the question's schema, keeps the ask pending, and settles on a good one", async () => {
      const askId = id("ask-");
      const asked = await c.ask({
        askId,
        agent: "ts-test",
        interrupt: {
          kind: "question",
          title: "Delivery address",
          questions: [{ field: "address", question: "Where should we ship it?", schema: { type: "string", minLength: 10 } }],
        },
      });
      assert.equal(asked.status, "pending");
      if (asked.status === "pending") {
        assert.equal(asked.pending?.kind, "question");
        assert.equal(asked.pending?.questions?.[0].field, "address");
      }
      await assert.rejects(c.resume("ask", askId, { answers: { address: "short" } }, { wait: WAIT }), (err: unknown) => {
        assert.ok(err instanceof RefusedError, `not a RefusedError: ${err}`);
        assert.equal(err.code, "invalid_answer");
        assert.match(err.message, /address/);
        return true;
      });
      const still = await c.waitForAsk(askId, { wait: 100 });
      assert.equal(still.status, "pending");
      await c.resume("ask", askId, { answers: { address: "1 Main Street, Springfield" } }, { wait: WAIT });
      const a = await c.waitForAsk(askId, { wait: WAIT });
      assert.equal(a.status, "answered");
      assert.deepEqual(a.status === "answered" && a.answers, { address: "1 Main Street, Springfield" });
      // The same askId again never asks twice: it gets the same answer.
      const again = await c.ask({ askId, interrupt: { kind: "question", questions: [{ field: "address", question: "Where?" }] } }, { wait: WAIT });
      assert.equal(again.status, "answered");
      assert.deepEqual(again.status === "answered" && again.answers, { address: "1 Main Street, Springfield" });
    });

    it("says an ask nobody answered by its deadline expired", async () => {
      const a: AskOutcome = await c.ask(
        { askId: id("ask-"), interrupt: { kind: "choice", question: "Which plan?", options: [{ id: "pro", label: "Pro" }, { id: "team", label: "Team" }], timeout: "1s" } },
        { wait: WAIT },
      );
      assert.equal(a.status, "expired");
      assert.equal(a.status === "expired" && a.kind, "choice");
    });

    it("refuses a malformed ask, invalid_payload, saying what to fix", async () => {
      await assert.rejects(c.ask({ askId: id("ask-"), interrupt: { kind: "question" } }, { wait: WAIT }), (err: unknown) => {
        assert.ok(err instanceof RefusedError, `not a RefusedError: ${err}`);
        assert.equal(err.code, "invalid_payload");
        assert.match(err.message, /question/);
        return true;
      });
    });

    it("starts a flow, resumes it to completion, and refuses a second start of the same run", async () => {
      const run = id("r-");
      const state = { email: "ann@example.com", name: "Ann Lee", phone: "555-0100", level: "advanced", driver: { name: "Bob Lee", license: "D-123" } };
      const started = await c.start("booking", { run, state, wait: WAIT });
      assert.equal(started.outcome, "interrupted");
      assert.equal(started.event?.kind, "interrupted");
      if (started.event?.kind === "interrupted") assert.equal(started.event.data.kind, "choice");
      const done = await c.resume("booking", run, { selected: ["product", "design"] }, { wait: WAIT });
      assert.equal(done.outcome, "completed");
      assert.equal(done.event?.kind, "completed");
      if (done.event?.kind === "completed") assert.deepEqual((done.event.data.state as { topics?: string[] }).topics, ["product", "design"]);
      await assert.rejects(c.start("booking", { run, wait: WAIT }), (err: unknown) => err instanceof RefusedError && err.code === "run_exists");
    });

    it("watches a run's events, and carries on after a stop from the last one seen, missing and repeating none", async () => {
      const askId = id("ask-");
      await c.ask({ askId, interrupt: { kind: "question", questions: [{ field: "a", question: "A?" }, { field: "b", question: "B?" }] } });
      await c.resume("ask", askId, { answers: { a: "1" } }, { wait: WAIT });
      await c.resume("ask", askId, { answers: { b: "2" } }, { wait: WAIT });
      await c.waitForAsk(askId, { wait: WAIT });
      const until = async (after: number, stop: (e: InterlockEvent, n: number) => boolean): Promise<InterlockEvent[]> => {
        const ctl = new AbortController();
        const t = setTimeout(() => ctl.abort(), WAIT);
        const seen: InterlockEvent[] = [];
        try {
          for await (const e of c.watch({ flow: "ask", run: askId, after }, { signal: ctl.signal })) {
            seen.push(e);
            if (stop(e, seen.length)) break;
          }
        } finally {
          clearTimeout(t);
        }
        return seen;
      };
      const all = await until(0, (e) => e.kind === "answered");
      assert.ok(all.length >= 4, `the run's events were ${all.map((e) => e.kind)}`);
      const first = await until(0, (_, n) => n === 2);
      const rest = await until(first[1]!.seq, (e) => e.kind === "answered");
      assert.deepEqual([...first, ...rest].map((e) => e.seq), all.map((e) => e.seq));
      const seqs = all.map((e) => e.seq);
      assert.deepEqual(seqs, [...new Set(seqs)].sort((x, y) => x - y), "events come once each, in stream order");
      assert.ok(all.every((e) => e.flow === "ask" && e.run === askId));
    });

    it("watches from now on: once onReady is called, sees the next event published", async () => {
      const ctl = new AbortController();
      const t = setTimeout(() => ctl.abort(), WAIT);
      let ready!: () => void;
      const isReady = new Promise<void>((r) => (ready = r));
      let calls = 0;
      const w = c.watch({ flow: "ask", kinds: ["interrupted"] }, { signal: ctl.signal, onReady: () => { calls++; ready(); } });
      const next = w.next(); // starts the watch
      let late: NodeJS.Timeout | undefined;
      await Promise.race([isReady, new Promise((_, fail) => (late = setTimeout(fail, WAIT, new Error("onReady was not called"))))]);
      clearTimeout(late);
      // One ask, made once the watch said it is in place: its event is the first.
      const askId = id("ask-");
      await c.ask({ askId, interrupt: { kind: "question", questions: [{ field: "x", question: "X?" }] } });
      const got = await next;
      clearTimeout(t);
      await w.return?.();
      assert.equal(got.done, false);
      assert.equal(got.value?.run, askId, "the watch's first event is the ask made once it was ready");
      assert.equal(got.value?.kind, "interrupted");
      assert.equal(calls, 1, "onReady is called once");
    });

    it("pages through the pending list, each waiting ask once, in the order asked", async () => {
      const ids = [id("ask-p"), id("ask-p"), id("ask-p")];
      for (const askId of ids) {
        await c.ask({ askId, interrupt: { kind: "question", questions: [{ field: "x", question: "X?" }] } });
      }
      const runs: string[] = [];
      let pages = 0;
      for (let cursor: string | undefined; ; ) {
        const page = await c.listPending({ flow: "ask", kind: "question", limit: 1, ...(cursor !== undefined && { cursor }) });
        pages++;
        assert.ok(page.items.length <= 1);
        runs.push(...page.items.map((p) => p.run));
        if (page.next === undefined) break;
        cursor = page.next;
      }
      assert.equal(new Set(runs).size, runs.length, `a run came twice: ${runs}`);
      assert.deepEqual(runs.filter((r) => ids.includes(r)), ids);
      assert.ok(pages >= 3);
    });
  });
}
