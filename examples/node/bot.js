// bot.js: an approval bot holding the supervisor role, on the client
// @interlockhq/client. It decides every refund approval it sees waiting on
// a supervisor (the refund flow's, the tool-call gate's for issue_refund,
// and an ask's approval of issue_refund): approve up to LIMIT, edit the
// amount down to LIMIT up to MAX, reject above MAX. One JSON line per
// decision; Ctrl-C stops it.
//
//   INTERLOCK_URL=nats://127.0.0.1:4222 node bot.js
import { URL, connectInterlock } from "./connect.js";

const NAME = process.env.BOT_NAME || "refund-bot";
const ROLE = "supervisor";
const LIMIT = 1000, MAX = 5000;

function decide({ args, decisions }) {
  const amount = args?.amount;
  if (typeof amount !== "number") return { decision: "reject", reason: "no amount to check" };
  if (amount <= LIMIT) return { decision: "approve", reason: `within the bot's limit of ${LIMIT}` };
  if (amount <= MAX && (decisions ?? ["edit"]).includes("edit")) return { decision: "edit", edits: { amount: LIMIT }, reason: `lowered to the bot's limit of ${LIMIT}` };
  return { decision: "reject", reason: `${amount} is over what the bot may approve; ask a person` };
}

const interlock = await connectInterlock(`/bots/${NAME}`);
const stop = new AbortController();
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => stop.abort());
// Every interrupted event from now on, of any flow: the bot sees what is
// asked while it runs. It says it is ready once the watch is in place.
let inPlace;
const ready = new Promise((resolve) => (inPlace = resolve));
const events = interlock.watch({ kinds: ["interrupted"] }, { signal: stop.signal, onReady: inPlace });
const first = events.next();
await Promise.race([ready, first]);
console.log(JSON.stringify({ ready: NAME, role: ROLE, url: URL }));

for (let e = await first; !e.done; e = await events.next()) {
  const data = e.value.data;
  if (data.kind !== "approval" || data.action !== "issue_refund" || data.approverRole !== ROLE) continue;
  const verdict = decide(data);
  try {
    // Over NATS the client sends the decision on the role's subject
    // (interlock.in.<flow>.resume.supervisor), which NATS permissions
    // guard, and approver is who the audit records as having decided; over
    // HTTP the caller the token names decides.
    const as = URL.startsWith("http") ? {} : { approver: NAME };
    await interlock.resume(data.flow, data.run, { ...verdict, requestId: data.requestId, ...as }, { wait: 10_000 });
    console.log(JSON.stringify({ flow: data.flow, run: data.run, action: data.action, args: data.args, ...verdict }));
  } catch (err) {
    // The approval stays pending when an answer fails: a person can still decide it.
    console.error(JSON.stringify({ flow: data.flow, run: data.run, error: String(err?.message ?? err) }));
  }
}
await interlock.close();
