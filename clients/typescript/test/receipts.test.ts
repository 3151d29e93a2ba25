// What the client checks before a gated tool runs, against the Go side's
// vectors (clients/testdata/receipts.json) and a real Interlock on both
// transports: the receipt verifies and states exactly the decision and
// the call (the gate's own receipt for a call it allowed), the args run
// are the ones approved, and the approval is taken once. A decision that
// does not hold runs nothing and throws: the tests change real decisions
// on their way from Interlock to the client.
import assert from "node:assert/strict";
import { generateKeyPairSync, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { jsonSchema, type ToolExecutionOptions } from "ai";
import { connect as natsConnect, type Msg, type NatsConnection, type SubscriptionOptions } from "@nats-io/transport-node";
import {
  ApprovalTakenError,
  ArgumentError,
  ReceiptError,
  argsDigest,
  auditKeyId,
  canonicalJson,
  connectHttp,
  connectNats,
  mayRun,
  parseAuditKey,
  verifyDecided,
  verifyReceipt,
  type AuditKey,
  type Decided,
  type Interlock,
  type JsonObject,
  type Receipt,
  type ToolCall,
  type ToolDecision,
} from "../src/index.js";
import { gateTool } from "../src/ai.js";
import { withGate } from "../src/openai-agents.js";
import { WAIT, httpUrl, id, interruptedOf, natsUrl, pendingOf, token, transports } from "./env.js";

const here = dirname(fileURLToPath(import.meta.url));

interface Vectors {
  now: string;
  keys: AuditKey[];
  untrusted: AuditKey[];
  digests: { name: string; args: string; canonical: string; digest: string }[];
  receipts: { name: string; receipt: string; valid: boolean; expired?: boolean; payload?: Receipt }[];
  call: { tool: string; args: JsonObject };
  decisions: Decided[];
}

const vectors = JSON.parse(readFileSync(join(here, "..", "..", "..", "testdata", "receipts.json"), "utf8")) as Vectors;
const now = new Date(vectors.now);

/** Asserts that err is a ReceiptError for reason. */
function receiptError(reason: ReceiptError["reason"], pattern?: RegExp) {
  return (err: unknown) => {
    assert.ok(err instanceof ReceiptError, `not a ReceiptError: ${err}`);
    assert.equal(err.reason, reason, err.message);
    assert.equal(err.code, "invalid_receipt");
    if (pattern !== undefined) assert.match(err.message, pattern);
    return true;
  };
}

describe("args digests and receipts, as the Go side computes them", () => {
  it("gives args the canonical JSON and digest Go gives them, however they are written", () => {
    for (const v of vectors.digests) {
      const args = JSON.parse(v.args) as JsonObject;
      assert.equal(canonicalJson(args), v.canonical, v.name);
      assert.equal(argsDigest(args), v.digest, v.name);
    }
    const byName = new Map(vectors.digests.map((v) => [v.name, v.digest]));
    assert.equal(byName.get("refund"), byName.get("refund, keys in another order, 4.8e3"));
    assert.equal(byName.get("refund"), byName.get("refund, spaced, 4800.0"));
    assert.equal(byName.get("unicode"), byName.get("unicode, escaped"));
    assert.equal(argsDigest(undefined), byName.get("empty"), "no args are the empty object");
  });

  it("verifies the receipts Go signs, and refuses every one that is not", () => {
    for (const v of vectors.receipts) {
      if (v.valid) {
        assert.deepEqual(verifyReceipt(v.receipt, vectors.keys, now), v.payload, v.name);
      } else if (v.expired) {
        assert.throws(() => verifyReceipt(v.receipt, vectors.keys, now), receiptError("expired", /held until/), v.name);
      } else {
        assert.throws(() => verifyReceipt(v.receipt, vectors.keys, now), receiptError("invalid", /does not verify/), v.name);
      }
    }
    const good = vectors.receipts.find((v) => v.name === "approved")!;
    assert.throws(() => verifyReceipt(good.receipt, vectors.untrusted, now), receiptError("invalid", /not among the audit keys trusted/));
    const k = vectors.keys[0]!;
    assert.deepEqual(verifyReceipt(good.receipt, [`${k.kid}:${k.publicKey}`], now), good.payload, "a key pinned as kid:base64");
    assert.deepEqual(verifyReceipt(good.receipt, [k.publicKey], now), good.payload, "a key pinned as base64");
  });

  it("refuses a pinned key that is not an Ed25519 public key, or not of its kid, saying how to give it", () => {
    const k = vectors.keys[0]!;
    assert.throws(() => parseAuditKey("abc"), (err: unknown) => err instanceof ArgumentError && /32 bytes in standard base64/.test(err.message));
    assert.throws(() => parseAuditKey(`0000000000000000:${k.publicKey}`), (err: unknown) => err instanceof ArgumentError && new RegExp(`its id is ${k.kid}`).test(err.message));
    assert.throws(() => connectHttp({ url: httpUrl, auditKeys: [] }), (err: unknown) => err instanceof ArgumentError && /auditKeys is empty/.test(err.message));
  });

  it("takes a decision whose receipt states it, and refuses one whose args, digests or receipt were changed", () => {
    const [approved, edited] = vectors.decisions as [Decided, Decided];
    const call = (d: Decided) => ({ callId: d.callId, tool: vectors.call.tool, argsDigest: argsDigest(vectors.call.args) });
    assert.equal(verifyDecided(call(approved), approved, vectors.keys, now)?.decision, "approved");
    assert.equal(verifyDecided(call(edited), edited, vectors.keys, now)?.finalDigest, argsDigest(edited.args as JsonObject));
    const changed = (d: Decided, f: (d: Decided) => void): Decided => {
      const c = structuredClone(d);
      f(c);
      return c;
    };
    const cases: [string, Decided, ReceiptError["reason"]][] = [
      ["other args", changed(edited, (d) => (d.args = { ...d.args, amount: 4800 })), "mismatch"],
      ["other args and their finalDigest", changed(edited, (d) => ((d.args = { ...d.args, amount: 4800 }), (d.finalDigest = argsDigest(d.args as JsonObject)))), "mismatch"],
      ["edited said approved", changed(edited, (d) => (d.decision = "approved")), "mismatch"],
      ["another call's receipt", changed(edited, (d) => (d.receipt = approved.receipt)), "mismatch"],
      ["no receipt", changed(approved, (d) => delete d.receipt), "missing"],
      ["a receipt signed by a key not trusted", changed(approved, (d) => (d.receipt = vectors.receipts.find((v) => v.name === "signed with a key not trusted")!.receipt)), "invalid"],
    ];
    for (const [name, d, reason] of cases) {
      assert.throws(() => verifyDecided(call(d), d, vectors.keys, now), receiptError(reason), name);
    }
    assert.throws(() => verifyDecided({ ...call(approved), argsDigest: argsDigest({ amount: 1 }) }, approved, vectors.keys, now), receiptError("mismatch", /other args/), "a decision on other args than the call's");
    assert.throws(() => verifyDecided({ ...call(approved), tool: "wire_money" }, approved, vectors.keys, now), receiptError("mismatch", /about call/), "a decision on another tool");
  });

  it("believes an allowed decision only on the gate's receipt of the call and its args", () => {
    const decision = (name: string) => vectors.decisions.find((d) => d.decision === name)!;
    const [allowed, approved] = [decision("allowed"), decision("approved")];
    const call = (d: Decided) => ({ callId: d.callId, tool: vectors.call.tool, argsDigest: argsDigest(vectors.call.args) });
    const r = verifyDecided(call(allowed), allowed, vectors.keys, now);
    assert.equal(r?.decision, "allowed");
    assert.equal(r?.auth, "server");
    assert.equal(r?.finalDigest, undefined, "the gate states no other args to run");
    const otherArgs = vectors.receipts.find((v) => v.name === "allowed, of other args")!;
    const changed = (d: Decided, f: (d: Decided) => void): Decided => {
      const c = structuredClone(d);
      f(c);
      return c;
    };
    const cases: [string, Decided, ReceiptError["reason"]][] = [
      ["no receipt", changed(allowed, (d) => delete d.receipt), "missing"],
      ["another call's receipt", changed(allowed, (d) => (d.receipt = approved.receipt)), "mismatch"],
      ["the receipt of the call with other args", changed(allowed, (d) => (d.receipt = otherArgs.receipt)), "mismatch"],
      ["the decision and receipt of the call with other args", changed(allowed, (d) => ((d.argsDigest = otherArgs.payload!.argsDigest), (d.receipt = otherArgs.receipt))), "mismatch"],
      ["an approval said allowed", changed(approved, (d) => (d.decision = "allowed")), "mismatch"],
      ["a receipt signed by a key not trusted", changed(allowed, (d) => (d.receipt = vectors.receipts.find((v) => v.name === "signed with a key not trusted")!.receipt)), "invalid"],
    ];
    for (const [name, d, reason] of cases) {
      assert.throws(() => verifyDecided(call(d), d, vectors.keys, now), receiptError(reason), name);
    }
  });
});

/** A tool call run as a gated tool is: the decision's args, when it may run. */
async function runTool(c: Interlock, call: ToolCall, ran: JsonObject[]): Promise<ToolDecision> {
  const d = await c.requestToolApproval(call, { wait: WAIT });
  if (mayRun(d)) ran.push(d.args);
  return d;
}

/** The keys the test deployment publishes, read over plain HTTP. */
async function deploymentKeys(): Promise<AuditKey[]> {
  const res = await fetch(`${httpUrl}/v1/audit/keys`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { keys: AuditKey[] }).keys;
}

/** An Ed25519 key of the test's own, and receipts signed with it as kid (the key's own id by default). */
function forger(kid?: string) {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url");
  const k = kid ?? auditKeyId(raw);
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  return (payload: Receipt) => {
    const signing = `${part({ alg: "EdDSA", kid: k, typ: "interlock-receipt+jws" })}.${part(payload)}`;
    return `${signing}.${sign(null, Buffer.from(signing), privateKey).toString("base64url")}`;
  };
}

const refund = (order: string, amount: number): JsonObject => ({ orderId: order, amount, currency: "USD" });

for (const tr of transports) {
  describe(`a gated call runs once, with a receipt that holds, over ${tr.name}`, () => {
    let c: Interlock;
    before(async () => {
      c = await tr.connect();
    });
    after(async () => {
      await c.close();
    });

    /** Requests call, waits until it is pending, and decides it. */
    async function decide(call: ToolCall & { callId: string }, decision: { decision: "approve" | "edit"; edits?: JsonObject }) {
      const first = await c.requestToolApproval(call, { wait: 200 });
      assert.equal(first.decision, "pending");
      await pendingOf(c, "gate", call.callId);
      await interruptedOf(c, "gate", call.callId);
      await c.resume("gate", call.callId, { ...decision, reason: "checked", ...tr.approver }, { wait: WAIT });
    }

    it("runs an approved call once: its receipt verifies and its approval is taken; the same call run again is refused as taken", async () => {
      const call = { callId: id("call-"), tool: "issue_refund", args: refund(id("o-"), 900) };
      await decide(call, { decision: "approve" });
      const ran: JsonObject[] = [];
      const d = await runTool(c, call, ran);
      assert.equal(d.decision, "approved");
      assert.deepEqual(ran, [call.args]);
      if (d.decision === "approved") {
        assert.equal(d.receipt?.decision, "approved");
        assert.equal(d.receipt?.run, call.callId);
        assert.equal(d.receipt?.finalDigest, argsDigest(call.args));
        assert.equal(d.consumed?.argsDigest, argsDigest(call.args));
      }
      await assert.rejects(runTool(c, call, ran), (err: unknown) => {
        assert.ok(err instanceof ApprovalTakenError, `not an ApprovalTakenError: ${err}`);
        assert.equal(err.code, "not_waiting");
        assert.match(err.message, /must not run: its approval was taken already/);
        return true;
      });
      assert.deepEqual(ran, [call.args], "the tool ran once");
    });

    it("runs an edited call once, with the edit's args, not its own", async () => {
      const call = { callId: id("call-"), tool: "issue_refund", args: refund(id("o-"), 1200) };
      await decide(call, { decision: "edit", edits: { amount: 1000 } });
      const ran: JsonObject[] = [];
      const d = await runTool(c, call, ran);
      assert.equal(d.decision, "edited");
      assert.deepEqual(ran, [{ ...call.args, amount: 1000 }]);
      await assert.rejects(runTool(c, call, ran), ApprovalTakenError);
      assert.equal(ran.length, 1);
    });

    it("lets one of two processes run a call approved once, the other is refused as taken", async () => {
      const call = { callId: id("call-"), tool: "issue_refund", args: refund(id("o-"), 700) };
      await decide(call, { decision: "approve" });
      const other = await tr.connect();
      try {
        const ran: JsonObject[] = [];
        const both = await Promise.allSettled([runTool(c, call, ran), runTool(other, call, ran)]);
        assert.deepEqual(both.map((r) => r.status).sort(), ["fulfilled", "rejected"]);
        const refused = both.find((r) => r.status === "rejected") as PromiseRejectedResult;
        assert.ok(refused.reason instanceof ApprovalTakenError, `not an ApprovalTakenError: ${refused.reason}`);
        assert.deepEqual(ran, [call.args]);
      } finally {
        await other.close();
      }
    });

    it("looks without taking (take: false), and takeApproval takes it once after", async () => {
      const call = { callId: id("call-"), tool: "issue_refund", args: refund(id("o-"), 800) };
      await decide(call, { decision: "approve" });
      const look = await c.requestToolApproval(call, { wait: WAIT, take: false });
      assert.equal(look.decision, "approved");
      assert.equal(look.decision === "approved" && look.consumed, undefined);
      const d = await c.requestToolApproval(call, { wait: WAIT, take: false });
      const taken = await c.takeApproval(d);
      assert.equal(taken.argsDigest, argsDigest(call.args));
      await assert.rejects(c.takeApproval(d), ApprovalTakenError);
      await assert.rejects(c.takeApproval({ ...d, args: { ...call.args, amount: 80_000 } } as ToolDecision), receiptError("mismatch", /run exactly the args approved/));
    });

    it("verifies with the deployment's key pinned, and runs nothing with another key pinned", async () => {
      const keys = await deploymentKeys();
      const pinned = await (tr.name === "nats"
        ? connectNats({ servers: natsUrl, auditKeys: keys.map((k) => `${k.kid}:${k.publicKey}`) })
        : connectHttp({ url: httpUrl, token, auditKeys: keys.map((k) => k.publicKey) }));
      const wrong = await (tr.name === "nats" ? connectNats({ servers: natsUrl, auditKeys: vectors.keys }) : connectHttp({ url: httpUrl, token, auditKeys: vectors.keys }));
      try {
        const call = { callId: id("call-"), tool: "issue_refund", args: refund(id("o-"), 650) };
        await decide(call, { decision: "approve" });
        const ran: JsonObject[] = [];
        await assert.rejects(runTool(wrong, call, ran), receiptError("invalid", /not among the audit keys trusted/));
        assert.deepEqual(ran, [], "nothing ran on a receipt the pinned key does not verify");
        await runTool(pinned, call, ran);
        assert.deepEqual(ran, [call.args], "the approval was still there to take");
      } finally {
        await pinned.close();
        await wrong.close();
      }
    });
  });
}

/** Counts the approvals a tampered client took. */
interface Takes {
  takes: number;
}

/**
 * An HTTP client whose answers to tool requests pass through change on
 * their way from the real API: what a proxy in between could do.
 */
function tamperedHttp(change: (d: Decided) => void, seen: Takes): Interlock {
  const through: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const path = new URL(String(input)).pathname;
    if (path.endsWith("/consume")) seen.takes++;
    if (init?.method !== "POST" || path !== "/v1/gate/requests" || res.status !== 200) return res;
    const body = (await res.json()) as { decided?: Decided };
    if (body.decided !== undefined) change(body.decided);
    return new Response(JSON.stringify(body), { status: res.status, headers: res.headers });
  };
  return connectHttp({ url: httpUrl, token, fetch: through });
}

/**
 * A NATS client whose connection hands it every decided event it reads
 * from the events stream passed through change: what a hand on the wire
 * could do.
 */
async function tamperedNats(nc: NatsConnection, change: (d: Decided) => void, seen: Takes): Promise<Interlock> {
  const bound = (t: object, p: string | symbol) => {
    const v = Reflect.get(t, p) as unknown;
    return typeof v === "function" ? v.bind(t) : v;
  };
  const changed = (m: Msg): Msg => {
    if (!m.headers?.get("Nats-Subject")?.endsWith(".decided")) return m;
    const ce = JSON.parse(new TextDecoder().decode(m.data)) as { data: Decided };
    change(ce.data);
    const data = new TextEncoder().encode(JSON.stringify(ce));
    return new Proxy(m, { get: (t, p) => (p === "data" ? data : bound(t, p)) });
  };
  const counting = (subject: string) => {
    if (subject.endsWith(".in.gate.consume")) seen.takes++;
  };
  const wire = new Proxy(nc, {
    get: (t, p) => {
      if (p === "subscribe") {
        return (subject: string, opts?: SubscriptionOptions) =>
          t.subscribe(subject, opts?.callback === undefined ? opts : { ...opts, callback: (err, m) => opts.callback!(err, m && changed(m)) });
      }
      if (p === "publish" || p === "request") {
        return (subject: string, ...rest: unknown[]) => (counting(subject), (Reflect.get(t, p) as (...a: unknown[]) => unknown).call(t, subject, ...rest));
      }
      return bound(t, p);
    },
  });
  return connectNats({ connection: wire });
}

for (const tr of transports) {
  describe(`a changed decision runs nothing, over ${tr.name}`, () => {
    let nc: NatsConnection;
    let c: Interlock;
    before(async () => {
      nc = await natsConnect({ servers: natsUrl });
      c = await tr.connect();
    });
    after(async () => {
      await c.close();
      await nc.drain();
    });

    it("throws a ReceiptError for other args, another finalDigest, a forged receipt or none; the approval stays to take", async () => {
      const call = { callId: id("call-"), tool: "issue_refund", args: refund(id("o-"), 900) };
      assert.equal((await c.requestToolApproval(call, { wait: 200 })).decision, "pending");
      await pendingOf(c, "gate", call.callId);
      await interruptedOf(c, "gate", call.callId);
      await c.resume("gate", call.callId, { decision: "approve", ...tr.approver }, { wait: WAIT });
      const [kid] = (await deploymentKeys()).map((k) => k.kid);
      const more = { ...call.args, amount: 90_000 };
      const restate = (d: Decided, signWith: (r: Receipt) => string) => {
        const r = JSON.parse(Buffer.from(d.receipt!.split(".")[1]!, "base64url").toString()) as Receipt;
        d.args = more;
        d.finalDigest = argsDigest(more);
        d.receipt = signWith({ ...r, finalDigest: d.finalDigest });
      };
      const cases: [string, (d: Decided) => void, ReceiptError["reason"]][] = [
        ["other args", (d) => (d.args = more), "mismatch"],
        ["other args and their finalDigest", (d) => ((d.args = more), (d.finalDigest = argsDigest(more))), "mismatch"],
        ["edited args said approved", (d) => ((d.decision = "edited"), (d.args = more), (d.finalDigest = argsDigest(more))), "mismatch"],
        ["a receipt of the other args forged with another key", (d) => restate(d, forger()), "invalid"],
        ["a receipt of the other args forged with another key under the deployment's kid", (d) => restate(d, forger(kid)), "invalid"],
        ["no receipt", (d) => delete d.receipt, "missing"],
      ];
      const ran: JsonObject[] = [];
      for (const [name, change, reason] of cases) {
        const seen = { takes: 0 };
        const t = tr.name === "http" ? tamperedHttp(change, seen) : await tamperedNats(nc, change, seen);
        await assert.rejects(runTool(t, call, ran), receiptError(reason), name);
        assert.equal(seen.takes, 0, `${name}: the approval was not taken`);
      }
      assert.deepEqual(ran, [], "no changed decision ran the tool");
      await runTool(c, call, ran);
      assert.deepEqual(ran, [call.args], "the approval was still there, for the call as approved");
    });

    it("runs an allowed call on the gate's receipt of it, taking nothing; none, another call's, one of other args or a forged one runs nothing", async () => {
      const call = { callId: id("call-"), tool: "issue_refund", args: refund(id("o-"), 120) };
      const receiptOf = (d: ToolDecision) => (d.decision === "pending" ? undefined : d.decided?.receipt);
      // The gate's own receipts: of another call, and of this call id
      // requested with other args.
      const other = await c.requestToolApproval({ ...call, callId: id("call-") }, { wait: WAIT });
      const otherArgs = { ...call.args, amount: 130 };
      const before = await c.requestToolApproval({ ...call, args: otherArgs }, { wait: WAIT });
      assert.equal(other.decision, "allowed");
      assert.equal(before.decision, "allowed");
      const [kid] = (await deploymentKeys()).map((k) => k.kid);
      const forge = (d: Decided) => {
        const r = JSON.parse(Buffer.from(d.receipt!.split(".")[1]!, "base64url").toString()) as Receipt;
        d.receipt = forger(kid)(r);
      };
      const cases: [string, (d: Decided) => void, ReceiptError["reason"]][] = [
        ["no receipt", (d) => delete d.receipt, "missing"],
        ["another call's receipt", (d) => (d.receipt = receiptOf(other)), "mismatch"],
        ["the receipt of the call with other args", (d) => (d.receipt = receiptOf(before)), "mismatch"],
        ["the decision and receipt of the call with other args", (d) => ((d.argsDigest = argsDigest(otherArgs)), (d.receipt = receiptOf(before))), "mismatch"],
        ["a receipt forged with another key under the deployment's kid", forge, "invalid"],
      ];
      const ran: JsonObject[] = [];
      for (const [name, change, reason] of cases) {
        const seen = { takes: 0 };
        const t = tr.name === "http" ? tamperedHttp(change, seen) : await tamperedNats(nc, change, seen);
        await assert.rejects(runTool(t, call, ran), receiptError(reason), name);
      }
      assert.deepEqual(ran, [], "no changed decision ran the tool");

      const seen = { takes: 0 };
      const t = tr.name === "http" ? tamperedHttp(() => {}, seen) : await tamperedNats(nc, () => {}, seen);
      const d = await runTool(t, call, ran);
      assert.equal(d.decision, "allowed");
      assert.deepEqual(ran, [call.args], "the allowed call ran, with its own args");
      if (d.decision === "allowed") {
        assert.deepEqual(
          { flow: d.receipt?.flow, run: d.receipt?.run, tool: d.receipt?.tool, argsDigest: d.receipt?.argsDigest, decision: d.receipt?.decision, auth: d.receipt?.auth },
          { flow: "gate", run: call.callId, tool: call.tool, argsDigest: argsDigest(call.args), decision: "allowed", auth: "server" },
        );
        assert.equal(d.consumed, undefined);
      }
      assert.equal(seen.takes, 0, "an allowed call has no approval to take");
      await assert.rejects(c.takeApproval(d), (err: unknown) => err instanceof ArgumentError && /no approval to take/.test(err.message));
    });

    it("runs no adapter's tool on an allowed decision without the gate's receipt", async () => {
      const seen = { takes: 0 };
      const t = tr.name === "http" ? tamperedHttp((d) => delete d.receipt, seen) : await tamperedNats(nc, (d) => delete d.receipt, seen);
      const ran: unknown[] = [];
      const ai = gateTool(t, "issue_refund", { inputSchema: jsonSchema<JsonObject>({ type: "object" }), execute: async (input: unknown, _: ToolExecutionOptions) => ran.push(input) });
      const options: ToolExecutionOptions = { toolCallId: id("call_"), messages: [] };
      await assert.rejects(Promise.resolve(ai.execute!(refund(id("o-"), 120), options)), receiptError("missing"), "the AI SDK's tool");
      const agents = withGate(t, { name: "issue_refund", execute: async (input: unknown, _context?: unknown, _details?: unknown) => ran.push(input) });
      await assert.rejects(agents.execute(refund(id("o-"), 120), undefined, { toolCall: { callId: id("call_") } }), receiptError("missing"), "the Agents SDK's tool");
      assert.deepEqual(ran, [], "neither tool ran");
    });
  });
}
