// refund-langgraph.js: a LangGraph.js graph whose refund step interrupt()s
// for a supervisor's approval, put to people as an Interlock ask
// (@interlockhq/client/langgraph): the inbox, Slack, e-mail, deadlines and
// the audit come with it. Run bot.js, or decide in the inbox; the thread
// resumes with the decision, and would on a new graph after a restart too
// (the thread lives in the checkpointer: use a durable one, such as the
// SQLite or Postgres saver, to survive one).
//
//   INTERLOCK_URL=nats://127.0.0.1:4222 node refund-langgraph.js
import { randomUUID } from "node:crypto";
import { Annotation, END, MemorySaver, START, StateGraph, interrupt } from "@langchain/langgraph";
import { runWithInterlock } from "@interlockhq/client/langgraph";
import { REFUND, WAIT_MS, connectInterlock, say } from "./connect.js";

const interlock = await connectInterlock("/agents/node-example-langgraph");

const State = Annotation.Root({ refund: Annotation(), outcome: Annotation() });
const graph = new StateGraph(State)
  .addNode("issue_refund", ({ refund }) => {
    // The value is the ask's interrupt: an approval of the refund.
    const d = interrupt({ kind: "approval", title: `Refund ${refund.amount} ${refund.currency} on order ${refund.orderId}`,
      action: "issue_refund", args: refund, approverRole: "supervisor", decisions: ["approve", "edit", "reject"] });
    if (d.decision !== "approve" && d.decision !== "edit") return { outcome: `not refunded: ${d.decision}${d.reason ? `: ${d.reason}` : ""}` };
    say("tool.called", { sdk: "langgraph", tool: "issue_refund", args: d.args });
    return { outcome: `refunded ${d.args.amount} ${d.args.currency} on ${d.args.orderId}` };
  })
  .addEdge(START, "issue_refund")
  .addEdge("issue_refund", END)
  .compile({ checkpointer: new MemorySaver() });

const config = { configurable: { thread_id: `refund-${randomUUID()}` } };
const out = await runWithInterlock(interlock, graph, { refund: REFUND }, config, { agent: "node-example-langgraph", wait: WAIT_MS });
if (!out.done) {
  say("timeout", { sdk: "langgraph", waitingFor: out.pending.map((p) => p.askId), ok: false });
  process.exit(1);
}
say("done", { sdk: "langgraph", text: out.values.outcome });
await interlock.close();
