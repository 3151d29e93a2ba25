// agent.js: an agent service that uses Interlock from JavaScript, through
// the client @interlockhq/client.
//
// It starts a run of the example flow `booking`, answers each question the
// run asks as a chat front end would (from a table of canned answers, with
// one bad email first so the validator's re-ask is shown), and once the
// booking is complete puts a refund large enough to need a supervisor's
// approval through the tool-call gate. It prints one JSON line per step and
// exits non-zero on a refusal, a failed run or a timeout.
//
//   INTERLOCK_URL=nats://127.0.0.1:4222 node agent.js
import { randomUUID } from "node:crypto";
import { RefusedError, mayRun } from "@interlockhq/client";
import { REFUND, WAIT_MS, connectInterlock, say } from "./connect.js";

const FLOW = "booking";

// What the person says to each question, by field. A list is said in
// order, one item per time the field is asked: the first email is not an
// email, so the flow's validator asks again with "ERROR: ..." in the
// question's context.
const ANSWERS = {
  email: ["ann-at-example", "Ann@Example.com"],
  name: "Ann Lee",
  phone: "555-0100",
  level: "advanced",
  "driver.name": "Bob Lee",
  "driver.license": "D-123",
};
// What the person picks when the run offers a choice.
const CHOICES = ["product", "design"];

function fail(step, fields) {
  say(step, { ...fields, ok: false });
  process.exit(1);
}

// answer says what the person would: the canned answer of every field the
// interrupt asks, or the choice.
function answer(data) {
  if (data.kind === "choice") return { selected: CHOICES };
  if (data.kind !== "question") fail("unexpected_interrupt", { kind: data.kind, node: data.node });
  const answers = {};
  for (const q of data.questions) {
    if (q.context?.startsWith("ERROR:")) say("reasked", { node: data.node, field: q.field, context: q.context });
    const a = ANSWERS[q.field];
    if (a === undefined) fail("no_answer", { node: data.node, field: q.field });
    answers[q.field] = Array.isArray(a) ? (a.length > 1 ? a.shift() : a[0]) : a;
  }
  return { answers };
}

// book runs the booking flow to its end: start returns the first interrupt
// the run stops on, each resume the next one, until it completes.
async function book(interlock) {
  const run = `r-${randomUUID()}`;
  let out = await interlock.start(FLOW, { run, state: {}, wait: WAIT_MS });
  say("start", { flow: FLOW, run });
  for (;;) {
    switch (out.outcome) {
      case "interrupted": {
        const data = out.event.data;
        const reply = answer(data);
        say("asked", { node: data.node, kind: data.kind, fields: data.questions?.map((q) => q.field), question: data.question });
        // The client sends the interrupt's token, requestId and checkpoint:
        // a resume that crosses another one is refused, not misapplied.
        out = await interlock.resume(FLOW, run, reply, { wait: WAIT_MS });
        say("answered", { node: data.node, ...reply });
        break;
      }
      case "completed":
        say("completed", { run, state: out.event.data.state });
        return run;
      case "queued":
        fail("timeout", { run, waitingFor: "the run's next event", seconds: WAIT_MS / 1000 });
        break;
      default: // failed, cancelled, expired
        fail(out.outcome, { run, data: out.event?.data });
    }
  }
}

// refund puts the refund through the gate: a short first wait shows the
// approval it waits on, then the same callId waits for the decision (a
// repeated call never asks twice).
async function refund(interlock, conversationId) {
  const call = { callId: `call-${randomUUID()}`, tool: "issue_refund", args: REFUND, agent: "node-agent", conversationId };
  say("gate.requested", { callId: call.callId, tool: call.tool, args: call.args });
  let d = await interlock.requestToolApproval(call, { wait: 200 });
  if (d.decision === "pending") {
    say("gate.waiting", { callId: d.callId, approverRole: d.pending?.approverRole, reason: d.pending?.reason, expiresAt: d.pending?.expiresAt });
    d = await interlock.requestToolApproval(call, { wait: WAIT_MS });
  }
  if (d.decision === "pending") fail("timeout", { callId: d.callId, waitingFor: "the gate's decision", seconds: WAIT_MS / 1000 });
  say("gate.decided", { callId: d.callId, decision: d.decision, args: d.args, approver: d.approver, reason: d.reason, rule: d.rule });
  // A real agent calls the tool here, with the args as decided (edited ones included).
  if (mayRun(d)) say("tool.called", { tool: call.tool, args: d.args });
  return call.callId;
}

const interlock = await connectInterlock("/agents/node-example");
try {
  const run = await book(interlock);
  await refund(interlock, run);
} catch (err) {
  // Against a serve without --gate-rules the gate is off: the request is
  // refused at once, unsupported, saying how to turn it on.
  if (err instanceof RefusedError) fail("refused", { flow: err.flow, run: err.run, ...(err.flow === "gate" && { callId: err.run }), code: err.code, message: err.message });
  fail("error", { code: err?.code, message: String(err?.message ?? err) });
}
await interlock.close();
