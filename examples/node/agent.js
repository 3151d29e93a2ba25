// agent.js: an agent service that uses Interlock from JavaScript.
//
// It starts a run of the example flow `booking`, answers each question the
// run asks as a chat front end would (from a table of canned answers, with
// one bad email first so the validator's re-ask is shown), and once the
// booking is complete asks the tool-call gate before it issues a refund
// large enough to need a supervisor's approval. It prints one JSON line per
// step and exits non-zero on a refusal, a failed run or a timeout.
//
//   NATS_URL=nats://127.0.0.1:4222 node agent.js
import { randomUUID } from "node:crypto";
import { connect, headers } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { CloudEvent } from "cloudevents";

const NATS_URL = process.env.NATS_URL || "nats://127.0.0.1:4222";
// How long to wait for each event of a run, and for the gate's decision.
const WAIT_MS = 1000 * Number(process.env.WAIT_SECONDS || 30);
const SOURCE = "/agents/node-example";

// Names with Interlock's default prefix, `interlock` (docs/protocol.md §1).
const RUNS_BUCKET = "interlock_runs";
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

// The risky tool call the agent wants to make once the booking is done: a
// refund over the $500 of examples/gate/rules.yaml (rule large-refund), so
// a supervisor must approve it first.
const TOOL = "issue_refund";
const TOOL_ARGS = { orderId: "o-1", amount: 1200, currency: "USD" };

const say = (step, fields = {}) => console.log(JSON.stringify({ step, ...fields }));

function fail(step, fields) {
  say(step, { ...fields, ok: false });
  process.exit(1);
}

// publish sends a structured CloudEvent through JetStream, with its id as
// Nats-Msg-Id so that a re-publish is dropped, and waits for the stream's
// acknowledgement.
async function publish(js, subject, type, run, data) {
  const ce = new CloudEvent({ id: randomUUID(), source: SOURCE, type, subject: run, datacontenttype: "application/json", data });
  const h = headers();
  h.set("Content-Type", "application/cloudevents+json");
  await js.publish(subject, JSON.stringify(ce), { msgID: ce.id, headers: h });
}

// watch subscribes to filter and returns next(), which returns the next
// event there: its kind (the subject's last token) and the CloudEvent. The
// subscription is in place on the server before watch returns, so that an
// event published after it, in answer to what we publish next, is not
// missed. next() fails after WAIT_MS.
async function watch(nc, filter) {
  const sub = nc.subscribe(filter);
  await nc.flush();
  const events = sub[Symbol.asyncIterator]();
  return async function next(waitingFor) {
    let timer;
    const timeout = new Promise((resolve) => { timer = setTimeout(resolve, WAIT_MS, { done: true }); });
    const { value: msg, done } = await Promise.race([events.next(), timeout]);
    clearTimeout(timer);
    if (done) fail("timeout", { waitingFor, seconds: WAIT_MS / 1000 });
    return { kind: msg.subject.split(".").pop(), event: new CloudEvent(msg.json()) };
  };
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

async function book(nc, js, kvm) {
  const run = `r-${randomUUID()}`;
  const next = await watch(nc, `interlock.ev.${FLOW}.${run}.>`);
  await publish(js, `interlock.in.${FLOW}.start`, "io.interlock.run.start", run, { state: {} });
  say("start", { flow: FLOW, run });
  for (;;) {
    const { kind, event } = await next(`an event of run ${run}`);
    const data = event.data;
    switch (kind) {
      case "started":
      case "resumed":
        break;
      case "interrupted": {
        const reply = answer(data);
        say("asked", { node: data.node, kind: data.kind, fields: data.questions?.map((q) => q.field), question: data.question });
        // The token answers this interrupt only; expectedCheckpoint makes
        // a resume that crosses another one refused, not misapplied.
        await publish(js, `interlock.in.${FLOW}.resume`, "io.interlock.run.resume", run,
          { resumeToken: data.resumeToken, requestId: data.requestId, expectedCheckpoint: data.checkpoint, ...reply });
        say("answered", { node: data.node, ...reply });
        break;
      }
      case "completed": {
        say("completed", { run, state: data.state });
        // The checkpoint (docs/protocol.md §5) says the same at rest.
        const runs = await kvm.open(RUNS_BUCKET);
        const entry = await runs.get(`${FLOW}.${run}`);
        say("checkpoint", { key: `${FLOW}.${run}`, status: entry?.json().status, revision: entry?.revision });
        return run;
      }
      case "refused":
        fail("refused", { run, code: data.code, message: data.message });
        break;
      default: // failed, cancelled, expired
        fail(kind, { run, data });
    }
  }
}

async function askGate(nc, js, conversationId) {
  const callId = `call-${randomUUID()}`;
  const next = await watch(nc, `interlock.ev.gate.${callId}.>`);
  await publish(js, "interlock.in.gate.request", "io.interlock.tool.requested", callId,
    { callId, tool: TOOL, args: TOOL_ARGS, agent: "node-agent", conversationId });
  say("gate.requested", { callId, tool: TOOL, args: TOOL_ARGS });
  for (;;) {
    const { kind, event } = await next(`the gate's decision on ${callId}`);
    const data = event.data;
    switch (kind) {
      case "interrupted":
        say("gate.waiting", { callId, approverRole: data.approverRole, reason: data.reason, expiresAt: data.expiresAt });
        break;
      case "decided": {
        say("gate.decided", { callId, decision: data.decision, args: data.args, approver: data.approver, reason: data.reason, rule: data.rule });
        if (["allowed", "approved", "edited"].includes(data.decision)) {
          // A real agent calls the tool here, with the args as decided.
          say("tool.called", { tool: TOOL, args: data.args ?? TOOL_ARGS });
        }
        return;
      }
      case "refused":
        fail("refused", { callId, code: data.code, message: data.message });
        break;
      default: // started, resumed: the gate's run going its way
        break;
    }
  }
}

try {
  const nc = await connect({ servers: NATS_URL, name: "interlock-node-agent", user: process.env.NATS_USER, pass: process.env.NATS_PASSWORD });
  const js = jetstream(nc);
  const run = await book(nc, js, new Kvm(js));
  await askGate(nc, js, run);
  await nc.drain();
} catch (err) {
  fail("error", { message: String(err?.message ?? err) });
}
