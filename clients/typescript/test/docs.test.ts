// The TypeScript example of docs/asks.md, run as written (its import
// pointed at this build, its NATS URL at the test's server): it gets the
// answer a person gives. And docs/protocol.md's JavaScript receipt
// verifier, as written.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { connectNats, type Decided, type Interlock, type Receipt } from "../src/index.js";
import { WAIT, eventually, httpUrl, id, interruptedOf, natsUrl, token } from "./env.js";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..", "..");

let c: Interlock;
before(async () => {
  c = await connectNats({ servers: natsUrl, source: "/docs-test" });
});
after(async () => {
  await c.close();
});

it("docs/asks.md's TypeScript example gets the answer a person gives", async () => {
  const doc = readFileSync(join(repo, "docs", "asks.md"), "utf8");
  const section = doc.split("\n## TypeScript\n")[1]?.split("\n## ")[0] ?? "";
  const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  assert.equal(blocks.length, 1, "docs/asks.md's TypeScript section has one example");
  const src = blocks[0]!
    .replace('from "@interlockhq/client"', `from ${JSON.stringify(pathToFileURL(join(here, "..", "src", "index.js")).href)}`)
    .replace('"nats://127.0.0.1:4222"', JSON.stringify(natsUrl));
  assert.ok(src.includes(natsUrl) && !src.includes("@interlockhq/client"), "the example no longer imports the client or connects as the test expects: teach this test");
  const file = join(here, "doc-ask.mjs");
  writeFileSync(file, src);

  const seen = new Set((await c.listPending({ flow: "ask", limit: 1000 })).items.map((i) => i.run));
  const example = run(process.execPath, [file], { timeout: WAIT * 2 });
  const askId = await eventually("the example's ask", async () => {
    const items = (await c.listPending({ flow: "ask", limit: 1000 })).items;
    return items.find((i) => !seen.has(i.run) && i.title === "Delivery address")?.run;
  });
  await c.resume("ask", askId, { answers: { address: "1 Rue de Rivoli, Paris" } }, { wait: WAIT });
  const { stdout } = await example;
  assert.equal(stdout, "answered 1 Rue de Rivoli, Paris\n");
});

it("docs/asks.md's gated tool call runs the refund once a person approves it", async () => {
  const doc = readFileSync(join(repo, "docs", "asks.md"), "utf8");
  const section = doc.split("\n## A gated tool call\n")[1]?.split("\n## ")[0] ?? "";
  const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  assert.equal(blocks.length, 1, "docs/asks.md's gated tool call has one TypeScript example");
  const src = blocks[0]!
    .replace('from "@interlockhq/client"', `from ${JSON.stringify(pathToFileURL(join(here, "..", "src", "index.js")).href)}`)
    .replace('connect("http://127.0.0.1:8080")', `connect(${JSON.stringify(natsUrl)})`);
  assert.ok(src.includes(natsUrl) && !src.includes("@interlockhq/client"), "the example no longer imports the client or connects as the test expects: teach this test");
  const file = join(here, "doc-gate.mjs");
  writeFileSync(file, src);

  const seen = new Set((await c.listPending({ flow: "gate", limit: 1000 })).items.map((i) => i.run));
  const example = run(process.execPath, [file], { timeout: WAIT * 2 });
  const callId = await eventually("the example's gated call", async () => {
    const items = (await c.listPending({ flow: "gate", limit: 1000 })).items;
    return items.find((i) => !seen.has(i.run) && i.action === "issue_refund")?.run;
  });
  await c.resume("gate", callId, { decision: "edit", edits: { amount: 400 }, reason: "partial", approver: "ts-bot" }, { wait: WAIT });
  const { stdout } = await example;
  assert.equal(stdout, 'refund {"amount":400,"currency":"USD","orderId":"o-1"}\n');
});

it("docs/asks-typescript.md's gate example, as written, reads its token from INTERLOCK_TOKEN over HTTP", async () => {
  const doc = readFileSync(join(repo, "docs", "asks-typescript.md"), "utf8");
  const section = doc.split("\n## Gate a tool call\n")[1]?.split("\n## ")[0] ?? "";
  const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  assert.equal(blocks.length, 1, "docs/asks-typescript.md's gate section has one example");
  const src = blocks[0]!
    .replace('from "@interlockhq/client"', `from ${JSON.stringify(pathToFileURL(join(here, "..", "src", "index.js")).href)}`)
    .replace('connect("http://127.0.0.1:8080")', `connect(${JSON.stringify(httpUrl)})`);
  assert.ok(src.includes(httpUrl) && !src.includes("@interlockhq/client") && !src.includes("token"),
    "the example no longer imports the client or connects as the test expects, or names a token: teach this test");
  const file = join(here, "doc-gate-http.mjs");
  writeFileSync(file, src);

  const seen = new Set((await c.listPending({ flow: "gate", limit: 1000 })).items.map((i) => i.run));
  const example = run(process.execPath, [file], { timeout: WAIT * 2, env: { ...process.env, INTERLOCK_TOKEN: token } });
  const callId = await eventually("the example's gated call", async () => {
    const items = (await c.listPending({ flow: "gate", limit: 1000 })).items;
    return items.find((i) => !seen.has(i.run) && i.action === "issue_refund")?.run;
  });
  await c.resume("gate", callId, { decision: "edit", edits: { amount: 400 }, reason: "partial", approver: "ts-bot" }, { wait: WAIT });
  const { stdout } = await example;
  assert.match(stdout, /^refund \{.*"amount":400.*\}, edited by ts-bot\n$/);
});

it("docs/protocol.md's JavaScript receipt verifier takes what Interlock signs and refuses what it did not", async () => {
  const doc = readFileSync(join(repo, "docs", "protocol.md"), "utf8");
  const section = doc.split("\n### Receipts\n")[1]?.split("\n## ")[0] ?? "";
  const blocks = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  assert.equal(blocks.length, 1, "docs/protocol.md's Receipts section has one JavaScript verifier");
  const file = join(here, "doc-receipt.mjs");
  writeFileSync(file, blocks[0]!);
  const { verifyReceipt } = (await import(pathToFileURL(file).href)) as { verifyReceipt: (r: string, keys: Record<string, string>, now?: Date) => Receipt };

  const vectors = JSON.parse(readFileSync(join(repo, "clients", "testdata", "receipts.json"), "utf8")) as {
    now: string;
    keys: { kid: string; publicKey: string }[];
    receipts: { name: string; receipt: string; valid: boolean; payload?: Receipt }[];
  };
  const keys = Object.fromEntries(vectors.keys.map((k) => [k.kid, k.publicKey]));
  const now = new Date(vectors.now);
  const refused = ["expired", "signed with a key not trusted", "signed with another key under the trusted kid", "the edited payload under the approved signature", "alg HS256", "typ JWT", "version 2", "two parts"];
  for (const v of vectors.receipts) {
    if (v.valid) assert.deepEqual(verifyReceipt(v.receipt, keys, now), v.payload, v.name);
    else if (refused.includes(v.name)) assert.throws(() => verifyReceipt(v.receipt, keys, now), Error, v.name);
  }

  // A receipt the test's Interlock signed, with the keys it publishes.
  const callId = id("call-");
  const call = { callId, tool: "issue_refund", args: { orderId: "o-doc", amount: 900 } };
  assert.equal((await c.requestToolApproval(call, { wait: 200 })).decision, "pending");
  await interruptedOf(c, "gate", callId);
  await c.resume("gate", callId, { decision: "approve", approver: "ts-bot" }, { wait: WAIT });
  const look = await c.requestToolApproval(call, { wait: WAIT, take: false });
  assert.equal(look.decision, "approved");
  const d = look as { decided?: Decided };
  const published = (await (await fetch(`${httpUrl}/v1/audit/keys`)).json()) as { keys: { kid: string; publicKey: string }[] };
  const r = verifyReceipt((d.decided as Decided).receipt!, Object.fromEntries(published.keys.map((k) => [k.kid, k.publicKey])));
  assert.deepEqual([r.flow, r.run, r.decision, r.finalDigest], ["gate", callId, "approved", (d.decided as Decided).finalDigest]);
  assert.throws(() => verifyReceipt((d.decided as Decided).receipt!, keys), /which you do not trust/);
});
