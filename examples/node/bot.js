// bot.js: an approval bot holding the supervisor role. It decides every
// refund approval it sees (the refund flow's, and the tool-call gate's for
// issue_refund): approve up to LIMIT, edit the amount down to LIMIT up to
// MAX, reject above MAX. One JSON line per decision; Ctrl-C stops it.
//
//   NATS_URL=nats://127.0.0.1:4222 node bot.js
import { randomUUID } from "node:crypto";
import { connect, headers } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { CloudEvent } from "cloudevents";

const NAME = process.env.BOT_NAME || "refund-bot";
const ROLE = "supervisor";
const LIMIT = 1000, MAX = 5000;

function decide({ args, decisions }) {
  const amount = args?.amount;
  if (typeof amount !== "number") return { decision: "reject", reason: "no amount to check" };
  if (amount <= LIMIT) return { decision: "approve", reason: `within the bot's limit of ${LIMIT}` };
  if (amount <= MAX && decisions.includes("edit")) return { decision: "edit", edits: { amount: LIMIT }, reason: `lowered to the bot's limit of ${LIMIT}` };
  return { decision: "reject", reason: `${amount} is over what the bot may approve; ask a person` };
}

const nc = await connect({ servers: process.env.NATS_URL || "nats://127.0.0.1:4222", name: NAME, user: process.env.NATS_USER, pass: process.env.NATS_PASSWORD });
const js = jetstream(nc);
const sub = nc.subscribe("interlock.ev.*.*.interrupted");
await nc.flush(); // the subscription is in place before we say so
console.log(JSON.stringify({ ready: NAME, role: ROLE }));
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => nc.drain());

async function answer(msg) {
  const { data } = new CloudEvent(msg.json());
  if (data.kind !== "approval" || data.action !== "issue_refund" || data.approverRole !== ROLE) return;
  const verdict = decide(data);
  const resume = new CloudEvent({ id: randomUUID(), source: `/bots/${NAME}`, type: "io.interlock.run.resume", subject: data.run,
    datacontenttype: "application/json", data: { resumeToken: data.resumeToken, requestId: data.requestId, approver: NAME, ...verdict } });
  const h = headers();
  h.set("Content-Type", "application/cloudevents+json");
  // The role is in the subject: NATS permissions say who may publish it.
  await js.publish(`interlock.in.${data.flow}.resume.${ROLE}`, JSON.stringify(resume), { msgID: resume.id, headers: h });
  console.log(JSON.stringify({ flow: data.flow, run: data.run, action: data.action, args: data.args, ...verdict }));
}

for await (const msg of sub) {
  // The approval stays pending when an answer fails: a person can still decide it.
  await answer(msg).catch((err) => console.error(JSON.stringify({ subject: msg.subject, error: String(err?.message ?? err) })));
}
