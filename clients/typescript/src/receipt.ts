// Receipts (docs/protocol.md, Receipts): what the client checks before a
// gated tool runs. A decision's receipt is a compact JWS, EdDSA over
// Ed25519, signed with the deployment's audit key; it states the call
// (flow gate, run = callId, tool, server, args digest), the decision
// (allowed by the gate itself, or a person's) and, for an approval, the
// digest of the args to run. Args digests are the hex SHA-256 of the
// args' RFC 8785 (JCS) canonical JSON, as the Go side computes them.
import { createHash, createPublicKey, verify as verifySignature } from "node:crypto";
import canonicalize from "canonicalize";
import { isObject } from "./common.js";
import { ArgumentError, ReceiptError } from "./errors.js";
import type { Decided, JsonObject } from "./types.js";

/** The typ of a receipt's JWS header. */
export const RECEIPT_TYPE = "interlock-receipt+jws";

/**
 * An audit public key, as GET /v1/audit/keys and the KV bucket
 * `<prefix>_config`, key `audit.keys`, publish it: kid, the first 16 hex
 * digits of the SHA-256 of the key's 32 bytes; publicKey, the 32 bytes in
 * standard base64.
 */
export interface AuditKey {
  kid: string;
  publicKey: string;
  since?: string;
}

/**
 * Audit keys to trust: AuditKey objects, or each as `interlock audit key`
 * prints it (the key's 32 bytes in standard base64, optionally prefixed
 * with its kid and a colon).
 */
export type AuditKeys = ReadonlyArray<AuditKey | string>;

/** What a receipt states (docs/protocol.md, Receipts). */
export interface Receipt {
  v: 1;
  /** The interrupt decided: for a tool call, flow gate and run the callId. */
  flow: string;
  run: string;
  requestId?: string;
  kind: string;
  /** What an approval proposes, and the digest of the args it was asked about. */
  tool?: string;
  server?: string;
  argsDigest?: string;
  /** allowed (by the gate: no rule held the call), approved, edited, rejected, responded, expired, answered or cancelled. */
  decision: string;
  /** approved and edited: the digest of the args to run. */
  finalDigest?: string;
  answerDigest?: string;
  approver?: string;
  auth?: string;
  voters?: string[];
  rule?: string;
  /** When it was decided, and when the receipt stops authorizing it (RFC 3339). */
  at: string;
  expires: string;
}

const base64url = /^[A-Za-z0-9_-]*$/;

/** The id of an audit public key: the first 16 hex digits of the SHA-256 of its 32 bytes. */
export function auditKeyId(publicKey: Uint8Array): string {
  return createHash("sha256").update(publicKey).digest("hex").slice(0, 16);
}

/**
 * Reads an audit key, checking that it is an Ed25519 public key (32 bytes
 * of standard base64) and that its kid is its id.
 */
export function parseAuditKey(key: AuditKey | string): AuditKey {
  let kid: string | undefined;
  let b64: string;
  if (typeof key === "string") {
    const text = key.trim();
    const colon = text.indexOf(":");
    [kid, b64] = colon < 0 ? [undefined, text] : [text.slice(0, colon), text.slice(colon + 1)];
  } else if (isObject(key) && typeof key.publicKey === "string") {
    [kid, b64] = [typeof key.kid === "string" ? key.kid : undefined, key.publicKey];
  } else {
    throw new ArgumentError(`audit key ${JSON.stringify(key)} is neither a string nor {kid, publicKey}: give the key as \`interlock audit key\` prints it`);
  }
  const pub = Buffer.from(b64, "base64");
  if (!/^[A-Za-z0-9+/]{43}=$/.test(b64) || pub.length !== 32) {
    throw new ArgumentError(`audit key ${JSON.stringify(b64)} is not an Ed25519 public key: give its 32 bytes in standard base64, as \`interlock audit key\` prints it`);
  }
  const id = auditKeyId(pub);
  if (kid !== undefined && kid !== id) {
    throw new ArgumentError(`audit key ${JSON.stringify(b64)} is named ${kid}, but its id is ${id}: give the key and its own kid`);
  }
  return { kid: id, publicKey: b64 };
}

/**
 * The RFC 8785 (JCS) canonical JSON of a JSON value, as the Go side writes
 * it: object keys sorted by UTF-16 code units, no space, numbers as
 * JavaScript writes them, strings escaped minimally. The value is taken as
 * JSON.stringify sends it.
 */
export function canonicalJson(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new ArgumentError(`${String(value)} is not a JSON value`);
  const out = canonicalize(JSON.parse(text));
  if (out === undefined) throw new ArgumentError(`${String(value)} has no canonical JSON`);
  return out;
}

/**
 * The digest binding a decision to a tool call's args: the hex SHA-256 of
 * their RFC 8785 canonical JSON (docs/protocol.md §4). The same args give
 * the same digest however they are written, in any language. No args are
 * the empty object.
 */
export function argsDigest(args: JsonObject | null | undefined): string {
  const value = args ?? {};
  if (!isObject(value)) throw new ArgumentError(`args ${JSON.stringify(value)} are not a JSON object`);
  return createHash("sha256").update(canonicalJson(value), "utf8").digest("hex");
}

function decodePart(part: string): unknown {
  if (!base64url.test(part)) return undefined;
  try {
    return JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
}

/** The kid a receipt's header names, unverified: which audit key to verify it with. */
export function receiptKid(receipt: string): string | undefined {
  const h = decodePart(receipt.trim().split(".")[0] ?? "");
  return isObject(h) && typeof h.kid === "string" ? h.kid : undefined;
}

/**
 * Verifies a receipt with the audit keys trusted (pinned, or those the
 * deployment publishes: GET /v1/audit/keys, or `<prefix>_config` key
 * `audit.keys`) at now, and returns what it states. It throws a
 * ReceiptError unless the receipt is a compact JWS of alg EdDSA and typ
 * interlock-receipt+jws, signed by the key its kid names among keys, of
 * version 1, and not expired.
 */
export function verifyReceipt(receipt: string, keys: AuditKeys, now: Date = new Date()): Receipt {
  const invalid = (why: string) => new ReceiptError("invalid", `the receipt does not verify: ${why}`);
  const parts = String(receipt).trim().split(".");
  if (parts.length !== 3) throw invalid("it is not base64url(header).base64url(payload).base64url(signature)");
  const [head, body, sig] = parts as [string, string, string];
  const h = decodePart(head);
  if (!isObject(h) || h.alg !== "EdDSA" || h.typ !== RECEIPT_TYPE || typeof h.kid !== "string") {
    throw invalid(`its header is not {"alg":"EdDSA","kid","typ":"${RECEIPT_TYPE}"}`);
  }
  const trusted = keys.map(parseAuditKey);
  const key = trusted.find((k) => k.kid === h.kid);
  if (key === undefined) {
    throw invalid(`it is signed with key ${JSON.stringify(h.kid.slice(0, 32))}, which is not among the audit keys trusted (${trusted.map((k) => k.kid).join(", ") || "none"})`);
  }
  const signature = base64url.test(sig) ? Buffer.from(sig, "base64url") : Buffer.alloc(0);
  const x = Buffer.from(key.publicKey, "base64").toString("base64url");
  let ok = false;
  try {
    const pub = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x }, format: "jwk" });
    ok = signature.length === 64 && verifySignature(null, Buffer.from(`${head}.${body}`, "ascii"), pub, signature);
  } catch {
    ok = false;
  }
  if (!ok) throw invalid(`its signature is not key ${key.kid}'s over its header and payload`);
  const r = decodePart(body);
  if (!isObject(r) || r.v !== 1 || typeof r.expires !== "string" || Number.isNaN(Date.parse(r.expires))) {
    throw invalid("its payload is not a receipt of version 1");
  }
  if (!(now.getTime() < Date.parse(r.expires))) {
    throw new ReceiptError("expired", `the receipt has expired: it held until ${r.expires}; request the call again with a new callId to ask anew`);
  }
  return r as unknown as Receipt;
}

/**
 * Checks that a verified receipt states d, the gate's decision: the same
 * call (flow gate, run = callId, tool, server, args digest), decision and
 * final args digest. It throws a ReceiptError when it does not.
 */
export function checkDecided(r: Receipt, d: Decided): void {
  const short = (s: string | undefined) => (s ?? "").slice(0, 12);
  let why: string | undefined;
  if (r.flow !== "gate" || r.run !== d.callId) why = `the receipt is of ${r.flow} ${r.run}, not of call ${d.callId}`;
  else if ((r.tool ?? "") !== (d.tool ?? "") || (r.server ?? "") !== (d.server ?? "")) why = `the receipt is of a call of ${r.tool}, not of ${d.tool}`;
  else if ((r.argsDigest ?? "") !== (d.argsDigest ?? "")) why = `the receipt is about other args (digest ${short(r.argsDigest)}, the decision's ${short(d.argsDigest)})`;
  else if (r.decision !== d.decision) why = `the receipt states ${r.decision}, the decision ${d.decision}`;
  else if ((r.finalDigest ?? "") !== (d.finalDigest ?? "")) {
    why = `the receipt states the args of digest ${short(r.finalDigest)} to run, the decision those of ${short(d.finalDigest)}`;
  }
  if (why !== undefined) throw new ReceiptError("mismatch", why);
}

/** The call a decision must be about: its id, tool, server, and the digest of the args requested. */
export interface DecidedCall {
  callId: string;
  tool: string;
  server?: string | undefined;
  argsDigest: string;
}

/** Reports whether decision lets a call run: allowed, approved or edited. */
function runs(decision: string): boolean {
  return decision === "allowed" || decision === "approved" || decision === "edited";
}

/**
 * Checks the gate's decision d on call before the call runs. Any decision
 * must be about call (its callId, tool, server and args digest). One that
 * lets the call run must carry a receipt that verifies with keys and
 * states exactly d, about call: allowed (the gate's own, the call runs
 * with its own args), or approved or edited with args whose digest is its
 * finalDigest (those are the args to run). It returns the receipt's
 * statement (undefined for a decision that runs nothing), and throws a
 * ReceiptError when a check fails: then run nothing.
 */
export function verifyDecided(call: DecidedCall, d: Decided, keys: AuditKeys, now: Date = new Date()): Receipt | undefined {
  const what = `call ${call.callId} of ${call.tool}`;
  const mismatch = (why: string) => new ReceiptError("mismatch", `the decision on ${what} does not hold, so it must not run: ${why}`);
  if (d.callId !== call.callId || (d.tool !== undefined && d.tool !== call.tool) || (d.server ?? "") !== (call.server ?? "")) {
    throw mismatch(`it is about call ${d.callId} of ${d.tool ?? "a tool it does not name"}${d.server ? ` of ${d.server}` : ""}`);
  }
  if (d.argsDigest !== undefined && d.argsDigest !== call.argsDigest) {
    throw mismatch(`it is about other args (digest ${d.argsDigest.slice(0, 12)}, the call's ${call.argsDigest.slice(0, 12)})`);
  }
  if (!runs(d.decision)) return undefined;
  if (d.receipt === undefined || d.receipt === "") {
    throw new ReceiptError(
      "missing",
      `the ${d.decision} decision on ${what} carries no receipt (a worker of an earlier version decided it, or it was not Interlock's), so it cannot be verified and must not run: request the call again with a new callId`,
    );
  }
  let r: Receipt;
  try {
    r = verifyReceipt(d.receipt, keys, now);
    checkDecided(r, d);
  } catch (err) {
    if (err instanceof ReceiptError) throw new ReceiptError(err.reason, `the ${d.decision} decision on ${what} must not run: ${err.message}`, { cause: err });
    throw err;
  }
  if ((r.tool ?? "") !== call.tool || (r.server ?? "") !== (call.server ?? "")) {
    throw mismatch(`its receipt is of a call of ${r.tool}${r.server ? ` of ${r.server}` : ""}`);
  }
  if (r.argsDigest !== call.argsDigest) {
    throw mismatch(`its receipt is about other args (digest ${(r.argsDigest ?? "").slice(0, 12)}, the call's ${call.argsDigest.slice(0, 12)})`);
  }
  // Allowed: the gate let the call run as requested, with the args whose
  // digest its receipt states; nobody approved other args.
  if (d.decision === "allowed") return r;
  if (!isObject(d.args)) throw mismatch("it carries no args to run");
  const digest = argsDigest(d.args as JsonObject);
  if (digest !== d.finalDigest) {
    throw mismatch(`its args (digest ${digest.slice(0, 12)}) are not the ones approved (digest ${(d.finalDigest ?? "").slice(0, 12)})`);
  }
  return r;
}

/** Checks the audit keys a caller pins, and returns them read (parseAuditKey); an empty list is refused. */
export function checkAuditKeys(keys: AuditKeys): AuditKey[] {
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new ArgumentError("auditKeys is empty: pin at least one key (as `interlock audit key` prints it), or leave auditKeys out to use the keys the deployment publishes");
  }
  return keys.map(parseAuditKey);
}

/**
 * The audit keys a connection trusts: those pinned, or else the ones the
 * deployment publishes, read once and again when a receipt names a key
 * not among them (a worker with a new key started).
 */
export class TrustedKeys {
  readonly #pinned: AuditKey[] | undefined;
  readonly #read: () => Promise<AuditKey[]>;
  #keys: Promise<AuditKey[]> | undefined;

  constructor(pinned: AuditKeys | undefined, read: () => Promise<AuditKey[]>) {
    this.#pinned = pinned === undefined ? undefined : checkAuditKeys(pinned);
    this.#read = read;
  }

  /** The keys to verify receipt with. */
  async for(receipt: string | undefined): Promise<AuditKey[]> {
    if (this.#pinned !== undefined) return this.#pinned;
    let keys = await this.#load(false);
    const kid = receipt === undefined ? undefined : receiptKid(receipt);
    if (kid !== undefined && !keys.some((k) => k.kid === kid)) keys = await this.#load(true);
    return keys;
  }

  async #load(again: boolean): Promise<AuditKey[]> {
    if (again || this.#keys === undefined) {
      const reading = this.#read().then((ks) => {
        // A published key that is not one is left out; the others verify.
        const good: AuditKey[] = [];
        for (const k of ks) {
          try {
            good.push(parseAuditKey(k));
          } catch {
            // left out
          }
        }
        return good;
      });
      this.#keys = reading;
      reading.catch(() => {
        if (this.#keys === reading) this.#keys = undefined;
      });
    }
    try {
      return await this.#keys!;
    } catch (err) {
      throw new ReceiptError(
        "no_keys",
        `cannot verify a decision's receipt: reading the deployment's audit keys failed (${(err as Error)?.message ?? err}); pin the deployment's key instead (auditKeys, as \`interlock audit key\` prints it)`,
        { cause: err },
      );
    }
  }
}
