// The NATS transport: the wire protocol itself (docs/protocol.md), on the
// official packages. Commands are CloudEvents in structured mode
// (application/cloudevents+json) published through JetStream with their id
// as Nats-Msg-Id; outcomes are read back from the events stream with
// batched direct gets, which need no consumer and which every client user
// of deploy/interlock-auth.conf may send. A live subscription on the same
// subjects only wakes the reader up: what counts is what the stream holds.
import { randomUUID } from "node:crypto";
import { connect, createInbox, headers, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, type JetStreamClient } from "@nats-io/jetstream";
import {
  DEFAULT_GATE_WAIT,
  DEFAULT_WAIT,
  KINDS,
  askAnswered,
  askPending,
  checkName,
  checkWait,
  isObject,
  kindOf,
  newId,
  seconds,
  toEvent,
  toolPending,
} from "./common.js";
import { ApprovalTakenError, ArgumentError, InterlockError, NoAnswerError, RefusedError, UnauthorizedError, UnreachableError, isRefusalCode } from "./errors.js";
import { settleDecision, takeDecision } from "./gate.js";
import { type AuditKey, type AuditKeys, TrustedKeys, checkAuditKeys } from "./receipt.js";
import type {
  Answered,
  AskOutcome,
  AskRequest,
  CloudEvent,
  Consumed,
  Decided,
  Interlock,
  InterlockEvent,
  Interrupted,
  PendingEntry,
  PendingPage,
  PendingQuery,
  ResumeInput,
  RunOutcome,
  StartOptions,
  ToolApprovalOptions,
  ToolCall,
  ToolDecision,
  WaitOptions,
  WatchOptions,
  WatchQuery,
} from "./types.js";
import type { Refused } from "./generated/schema.js";

/**
 * How long a resume waits for the interrupted event of a run whose
 * interrupt was just written (its pending entry comes first).
 */
const ANNOUNCE_WAIT = 5_000;

/** Options of connectNats. */
export interface NatsOptions {
  /** The NATS server(s). Defaults to nats://127.0.0.1:4222. */
  servers?: string | string[];
  /** A user of deploy/interlock-auth.conf (agent, bot) and its password. */
  user?: string;
  pass?: string;
  /** A NATS token, where the server takes one. */
  token?: string;
  /**
   * The inbox prefix of the user: with deploy/interlock-auth.conf each client
   * user receives replies only on its own, _INBOX_<user> (_INBOX_agent).
   * Defaults to _INBOX_<user> when user is set, else NATS's _INBOX.
   */
  inboxPrefix?: string;
  /** The deployment's prefix (interlock serve --prefix). Defaults to interlock. */
  prefix?: string;
  /** The CloudEvents source of what the client sends. Defaults to /agents/typescript. */
  source?: string;
  /** The connection's name, shown by the NATS server. Defaults to interlock-client-ts. */
  name?: string;
  /** A connection of your own, instead of servers and credentials; close leaves it open. */
  connection?: NatsConnection;
  /**
   * Pins the audit public keys that gated calls' receipts are verified
   * with: each as `interlock audit key` prints it (the 32 bytes in
   * standard base64, optionally prefixed with its kid and a colon), or
   * {kid, publicKey}. Defaults to the keys the deployment's workers
   * publish (KV bucket `<prefix>_config`, key `audit.keys`), read with one
   * direct get when a receipt is first verified.
   */
  auditKeys?: AuditKeys;
}

/** Connects to Interlock over NATS. */
export async function connectNats(opts: NatsOptions = {}): Promise<Interlock> {
  const servers = opts.servers ?? "nats://127.0.0.1:4222";
  const prefix = opts.prefix ?? "interlock";
  if (!/^[A-Za-z0-9_-]{1,32}$/.test(prefix)) throw new ArgumentError(`prefix ${JSON.stringify(prefix)} is not a deployment prefix: use what interlock serve --prefix was given, interlock by default`);
  const inboxPrefix = opts.inboxPrefix ?? (opts.user !== undefined ? `_INBOX_${opts.user}` : "_INBOX");
  // Bad pinned keys are refused before anything connects.
  if (opts.auditKeys !== undefined) checkAuditKeys(opts.auditKeys);
  let nc = opts.connection;
  if (nc === undefined) {
    try {
      nc = await connect({
        servers,
        name: opts.name ?? "interlock-client-ts",
        inboxPrefix,
        ...(opts.user !== undefined && { user: opts.user }),
        ...(opts.pass !== undefined && { pass: opts.pass }),
        ...(opts.token !== undefined && { token: opts.token }),
      });
    } catch (err) {
      const why = (err as Error)?.message ?? String(err);
      if (/authori[sz]ation/i.test(why)) {
        throw new UnauthorizedError("unauthorized", `NATS at ${servers} refused the credentials (${why}): pass user and pass of a user of the deployment (deploy/interlock-auth.conf: agent, bot), or token`, { cause: err });
      }
      throw new UnreachableError(
        "unreachable",
        `cannot reach NATS at ${servers} (${why}): is \`interlock serve\` (or the NATS server it uses) running there? Pass servers, and user, pass and inboxPrefix for a deployment with authorization (deploy/interlock-auth.conf)`,
        { cause: err },
      );
    }
  }
  return new NatsInterlock(nc, opts.connection === undefined, prefix, inboxPrefix, opts.source ?? "/agents/typescript", Array.isArray(servers) ? servers.join(",") : servers, opts.auditKeys);
}

/** How often a reader reads the stream when nothing woke it. */
const POLL = 500;
/** How often a watch reads the stream when nothing woke it. */
const WATCH_POLL = 2000;
/** How long a read of a stream may take. */
const READ_TIMEOUT = 10_000;

interface Stored {
  subject: string;
  seq: number;
  msg: Msg;
}

interface Batch {
  msgs: Stored[];
  /** Messages matching after the last one returned. */
  pending: number;
}

class NatsInterlock implements Interlock {
  readonly #nc: NatsConnection;
  readonly #own: boolean;
  readonly #js: JetStreamClient;
  readonly #p: string;
  readonly #events: string;
  readonly #inbox: string;
  readonly #source: string;
  readonly #where: string;
  readonly #keys: TrustedKeys;

  constructor(nc: NatsConnection, own: boolean, prefix: string, inbox: string, source: string, where: string, auditKeys: AuditKeys | undefined) {
    this.#nc = nc;
    this.#own = own;
    this.#js = jetstream(nc);
    this.#p = prefix;
    this.#events = prefix.toUpperCase().replaceAll("-", "_") + "_EVENTS";
    this.#inbox = inbox;
    this.#source = source;
    this.#where = where;
    this.#keys = new TrustedKeys(auditKeys, () => this.#auditKeys());
  }

  async close(): Promise<void> {
    if (this.#own && !this.#nc.isClosed()) await this.#nc.drain();
  }

  // --- the gate and asks ---

  async requestToolApproval(call: ToolCall, opts: ToolApprovalOptions = {}): Promise<ToolDecision> {
    const wait = checkWait(opts.wait, DEFAULT_GATE_WAIT);
    const callId = checkName("callId", call.callId ?? newId("call-"));
    if (typeof call.tool !== "string" || call.tool === "") throw new ArgumentError("a tool call needs tool, the tool's name");
    const r = await this.#request({
      flow: "gate",
      run: callId,
      subject: `${this.#p}.in.gate.request`,
      type: "io.interlock.tool.requested",
      data: { ...call, callId },
      settled: "decided",
      what: `the tool request ${callId}`,
      hint: "`interlock serve --gate-rules FILE`",
      wait,
      untilPending: false,
    });
    if (r.settled !== undefined) {
      return settleDecision({ ...call, callId }, r.settled as Decided, this.#keys, opts.take === false ? undefined : (id, digest) => this.#take(id, digest));
    }
    return toolPending(callId, r.pending);
  }

  async takeApproval(d: ToolDecision): Promise<Consumed> {
    return takeDecision(d, this.#keys, (id, digest) => this.#take(id, digest));
  }

  /**
   * Takes the approval of call callId for the args of digest: publishes
   * io.interlock.tool.consume and waits for the consumed event it caused,
   * or its refusal.
   */
  async #take(callId: string, digest: string): Promise<Consumed> {
    const what = `taking the approval of call ${callId}`;
    const f = await this.#follow(this.#subject("gate", callId, ">"));
    try {
      const id = await this.#publish(`${this.#p}.in.gate.consume`, "io.interlock.tool.consume", callId, { callId, argsDigest: digest }, what);
      const deadline = Date.now() + DEFAULT_WAIT;
      for (;;) {
        const m = await f.poll();
        if (m !== undefined) {
          const kind = kindOf(m.subject);
          const ev = decode(m);
          if (kind === "consumed" && ev.cloudEvent.causationid === id) return ev.data as unknown as Consumed;
          if (kind === "refused") {
            const rf = ev.data as Refused;
            if (rf.eventId !== id && ev.cloudEvent.causationid !== id) continue;
            if (rf.code === "not_waiting") {
              throw new ApprovalTakenError(
                `call ${callId} must not run: its approval was taken already, and an approval runs its call once (${rf.message}); request the call again with a new callId to ask anew`,
                { flow: "gate", run: callId },
              );
            }
            throw refused(rf, what);
          }
          continue;
        }
        if (Date.now() >= deadline) break;
        await f.wait(Math.min(POLL, deadline - Date.now()));
      }
      throw new NoAnswerError(
        "no_answer",
        `no Interlock worker answered ${what} on ${this.#p}.in.gate.consume within ${seconds(DEFAULT_WAIT)}: is \`interlock serve --gate-rules FILE\` running and reachable at ${this.#where}? The call did not run; request it again with the same callId, then take it`,
        { flow: "gate", run: callId },
      );
    } finally {
      f.stop();
    }
  }

  /** The audit keys the deployment's workers publish: `<prefix>_config`, key audit.keys, by one direct get. */
  async #auditKeys(): Promise<AuditKey[]> {
    const bucket = `${this.#p}_config`;
    // The key in the request's subject: the one read of the bucket a
    // client user may make (deploy/interlock-auth.conf).
    const b = await this.#direct(`KV_${bucket}`, undefined, true, `$KV.${bucket}.audit.keys`);
    const m = b.msgs[0];
    if (m === undefined || m.msg.headers?.get("KV-Operation")) {
      throw new InterlockError("no_keys", `bucket ${bucket} holds no audit.keys: each worker publishes its key there when it starts (has \`interlock serve\` run with prefix ${this.#p}?)`);
    }
    const keys = JSON.parse(new TextDecoder().decode(m.msg.data)) as unknown;
    if (!Array.isArray(keys)) throw new InterlockError("protocol_error", `audit.keys in bucket ${bucket} is not a list of {kid, publicKey, since}`);
    return keys as AuditKey[];
  }

  async ask(request: AskRequest, opts: WaitOptions = {}): Promise<AskOutcome> {
    const wait = checkWait(opts.wait, DEFAULT_WAIT);
    const askId = checkName("askId", request.askId ?? newId("ask-"));
    const r = await this.#request({
      flow: "ask",
      run: askId,
      subject: `${this.#p}.in.ask.request`,
      type: "io.interlock.ask.requested",
      data: { ...request, askId },
      settled: "answered",
      what: `the ask ${askId}`,
      hint: "`interlock serve`",
      wait,
      untilPending: opts.wait === undefined,
    });
    if (r.settled !== undefined) return askAnswered(r.settled as Answered);
    return askPending(askId, r.pending);
  }

  async waitForAsk(askId: string, opts: { wait: number }): Promise<AskOutcome> {
    checkName("askId", askId);
    const wait = checkWait(opts.wait, DEFAULT_WAIT);
    const runEvents = this.#subject("ask", askId, ">");
    const f = await this.#follow(this.#subject("ask", askId, "answered"));
    try {
      const answered = await this.#last(this.#subject("ask", askId, "answered"));
      if (answered !== undefined) return askAnswered(answered.data as Answered);
      if ((await this.#last(runEvents)) === undefined) {
        throw new InterlockError("unknown_run", `there is no ask ${askId}: ${this.#events} holds no event of it (asked under another askId, or longer ago than the stream keeps events?)`, { flow: "ask", run: askId });
      }
      const deadline = Date.now() + wait;
      for (;;) {
        const m = await f.poll();
        if (m !== undefined) return askAnswered(decode(m).data as Answered);
        if (Date.now() >= deadline) break;
        await f.wait(Math.min(POLL, deadline - Date.now()));
      }
      const last = await this.#last(this.#subject("ask", askId, "interrupted"));
      return askPending(askId, last?.data as Interrupted | undefined);
    } finally {
      f.stop();
    }
  }

  /**
   * Publishes a request that starts a built-in flow's run (a tool request,
   * an ask) and waits up to wait for the event that settles it; when none
   * comes in time, or at once with untilPending, it returns the interrupt
   * the run waits on.
   */
  async #request(r: {
    flow: string;
    run: string;
    subject: string;
    type: string;
    data: unknown;
    settled: string;
    what: string;
    hint: string;
    wait: number;
    untilPending: boolean;
  }): Promise<{ settled?: unknown; pending?: Interrupted }> {
    const f = await this.#follow(this.#subject(r.flow, r.run, ">"));
    try {
      // A repeated request of a run still waiting publishes nothing: its
      // latest event is the interrupt it waits on.
      let pending: Interrupted | undefined;
      const last = await this.#last(this.#subject(r.flow, r.run, ">"));
      if (last !== undefined && last.kind === "interrupted") {
        pending = last.data as Interrupted;
        if (r.untilPending) return { pending };
      }
      const id = await this.#publish(r.subject, r.type, r.run, r.data, r.what);
      const deadline = Date.now() + r.wait;
      for (;;) {
        const m = await f.poll();
        if (m !== undefined) {
          const kind = kindOf(m.subject);
          if (kind === r.settled) return { settled: decode(m).data };
          if (kind === "interrupted") {
            pending = decode(m).data as Interrupted;
            if (r.untilPending) return { pending };
          } else if (kind === "refused") {
            const rf = decode(m).data as Refused;
            if (rf.eventId === id) throw refused(rf, r.what);
          }
          continue;
        }
        if (Date.now() >= deadline) break;
        await f.wait(Math.min(POLL, deadline - Date.now()));
      }
      if (pending !== undefined) return { pending };
      throw new NoAnswerError(
        "no_answer",
        `no Interlock worker answered on ${r.subject} within ${seconds(r.wait)}: is ${r.hint} running and reachable at ${this.#where}? ${r.what} was queued as event ${id}: ask again with the same id to wait again`,
        { flow: r.flow, run: r.run },
      );
    } finally {
      f.stop();
    }
  }

  // --- runs ---

  async start(flow: string, opts: StartOptions = {}): Promise<RunOutcome> {
    checkName("flow", flow);
    const run = checkName("run", opts.run ?? newId("r-").slice(0, 14));
    const wait = checkWait(opts.wait, DEFAULT_WAIT);
    const data: Record<string, unknown> = {};
    if (opts.state !== undefined) data.state = opts.state;
    if (opts.origin !== undefined) data.origin = opts.origin;
    return this.#command(flow, run, `${this.#p}.in.${flow}.start`, "io.interlock.run.start", data, undefined, wait, `the start of ${flow} ${run}`);
  }

  async resume(flow: string, run: string, resume: ResumeInput, opts: WaitOptions = {}): Promise<RunOutcome> {
    checkName("flow", flow);
    checkName("run", run);
    const wait = checkWait(opts.wait, DEFAULT_WAIT);
    if ("resumeToken" in (resume as object)) throw new ArgumentError("resume takes no resumeToken: the client reads it from the run's interrupted event");
    // The token of the interrupt now pending, from the run's last
    // interrupted event.
    // A run's pending entry is written just before its interrupted event:
    // a resume sent on seeing the entry waits a moment for the event.
    let last = await this.#last(this.#subject(flow, run, "interrupted"));
    for (const until = Date.now() + Math.min(wait, ANNOUNCE_WAIT); last === undefined && Date.now() < until; ) {
      await new Promise((r) => setTimeout(r, 50));
      last = await this.#last(this.#subject(flow, run, "interrupted"));
    }
    if (last === undefined) {
      throw new InterlockError(
        "not_waiting",
        `run ${run} of flow ${flow} has no interrupted event in ${this.#events}: it never waited, or waited longer ago than the stream keeps events (\`interlock reannounce ${flow} ${run}\` announces its interrupt again)`,
        { flow, run },
      );
    }
    const asked = last.data as Interrupted;
    const requestId = resume.requestId ?? asked.requestId;
    // An approval's decision goes to its role's subject, where the
    // deployment's permissions say who may decide it.
    const role = resume.decision !== undefined && asked.kind === "approval" && asked.approverRole ? `.${asked.approverRole}` : "";
    const data = { ...resume, resumeToken: asked.resumeToken, requestId };
    return this.#command(flow, run, `${this.#p}.in.${flow}.resume${role}`, "io.interlock.run.resume", data, requestId, wait, `the resume of ${flow} ${run}`);
  }

  /**
   * Publishes a start or a resume and waits for the event that settles it:
   * the run's next interrupted, completed, failed, cancelled or expired
   * event (after the resumed event of requestId, for a resume), or its
   * refusal.
   */
  async #command(flow: string, run: string, subject: string, type: string, data: unknown, requestId: string | undefined, wait: number, what: string): Promise<RunOutcome> {
    const f = await this.#follow(this.#subject(flow, run, ">"));
    try {
      const id = await this.#publish(subject, type, run, data, what);
      let applied = requestId === undefined;
      const deadline = Date.now() + wait;
      for (;;) {
        const m = await f.poll();
        if (m !== undefined) {
          const kind = kindOf(m.subject);
          const ev = decode(m);
          if (kind === "refused") {
            const rf = ev.data as Refused;
            if (rf.eventId === id) throw refused(rf, what);
          } else if (kind === "resumed") {
            if ((ev.data as { requestId?: string }).requestId === requestId) applied = true;
          } else if (applied && ["interrupted", "completed", "failed", "cancelled", "expired"].includes(kind)) {
            return { flow, run, outcome: kind as RunOutcome["outcome"], event: ev };
          }
          continue;
        }
        if (Date.now() >= deadline) return { flow, run, outcome: "queued" };
        await f.wait(Math.min(POLL, deadline - Date.now()));
      }
    } finally {
      f.stop();
    }
  }

  // --- reading ---

  watch(q: WatchQuery = {}, opts: WatchOptions = {}): AsyncIterableIterator<InterlockEvent> {
    if (q.flow !== undefined) checkName("flow", q.flow);
    if (q.run !== undefined) {
      if (q.flow === undefined) throw new ArgumentError("watch: run needs flow");
      checkName("run", q.run);
    }
    const kinds = q.kinds !== undefined && q.kinds.length > 0 ? new Set<string>(q.kinds) : undefined;
    for (const k of kinds ?? []) checkName("event kind", k);
    const kind = kinds?.size === 1 ? [...kinds][0]! : ">";
    return this.#watch(this.#subject(q.flow ?? "*", q.run ?? "*", kind), kinds, q.after, opts.signal, opts.onReady);
  }

  async *#watch(filter: string, kinds: Set<string> | undefined, after: number | undefined, signal: AbortSignal | undefined, onReady: (() => void) | undefined): AsyncGenerator<InterlockEvent> {
    const f = await this.#follow(filter, after);
    onReady?.();
    try {
      let failures = 0;
      while (!signal?.aborted) {
        let m: Stored | undefined;
        try {
          m = await f.poll();
          failures = 0;
        } catch (err) {
          // Reads fail while the connection is down; the client reconnects
          // by itself, and the watch carries on from the same sequence.
          if (this.#nc.isClosed() || ++failures > 30) throw err;
          await f.wait(WATCH_POLL, signal);
          continue;
        }
        if (m === undefined) {
          await f.wait(WATCH_POLL, signal);
          continue;
        }
        const kind = kindOf(m.subject);
        if (kinds !== undefined && !kinds.has(kind)) continue;
        yield decode(m);
      }
    } finally {
      f.stop();
    }
  }

  async listPending(q: PendingQuery = {}): Promise<PendingPage> {
    const limit = q.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new ArgumentError(`limit ${limit} is out of range: use 1 to 1000`);
    const kinds = q.kind === undefined ? [] : ([] as string[]).concat(q.kind);
    const roles = q.role === undefined ? [] : ([] as string[]).concat(q.role);
    for (const k of kinds) {
      if (!(KINDS as string[]).includes(k)) throw new ArgumentError(`kind ${JSON.stringify(k)} is not a kind: use ${KINDS.join(", ")}`);
    }
    for (const r of roles) checkName("role", r);
    const bucket = `${this.#p}_pending`;
    const filter = q.flow !== undefined ? `$KV.${bucket}.${checkName("flow", q.flow)}.*` : `$KV.${bucket}.>`;
    let next = q.cursor ? parseCursor(q.cursor) + 1 : 1;
    const items: PendingEntry[] = [];
    const seqs: number[] = [];
    const batch = kinds.length > 0 || roles.length > 0 ? 256 : limit + 1;
    for (;;) {
      const b = await this.#batch(`KV_${bucket}`, filter, next, batch);
      for (const m of b.msgs) {
        const h = m.msg.headers;
        if (h?.get("KV-Operation") || h?.get("Nats-Marker-Reason")) continue;
        const p = JSON.parse(new TextDecoder().decode(m.msg.data)) as PendingEntry;
        if (kinds.length > 0 && !kinds.includes(p.kind)) continue;
        if (roles.length > 0 && !roles.includes((p as { approverRole?: string }).approverRole ?? "")) continue;
        items.push(p);
        seqs.push(m.seq);
        if (items.length > limit) break;
      }
      if (items.length > limit || b.msgs.length === 0 || b.pending === 0) break;
      next = b.msgs[b.msgs.length - 1]!.seq + 1;
    }
    const page: PendingPage = { items: items.slice(0, limit) };
    if (items.length > limit) page.next = cursor(seqs[limit - 1]!);
    return page;
  }

  // --- the wire ---

  #subject(flow: string, run: string, kind: string): string {
    return `${this.#p}.ev.${flow}.${run}.${kind}`;
  }

  /** Publishes a structured CloudEvent through JetStream, its id as Nats-Msg-Id. */
  async #publish(subject: string, type: string, run: string, data: unknown, what: string): Promise<string> {
    const id = randomUUID();
    const ce: CloudEvent = { specversion: "1.0", id, source: this.#source, type, subject: run, time: new Date().toISOString(), datacontenttype: "application/json", data };
    const h = headers();
    h.set("Content-Type", "application/cloudevents+json");
    const body = JSON.stringify(ce);
    const max = this.#nc.info?.max_payload;
    if (max !== undefined && Buffer.byteLength(body) > max) {
      throw new InterlockError("invalid_payload", `${what} is ${Buffer.byteLength(body)} bytes as a message, more than the ${max} bytes the NATS server takes in one (max_payload): keep large data out of the state, args and answers (store it elsewhere and send a reference)`);
    }
    try {
      await this.#js.publish(subject, body, { msgID: id, headers: h, timeout: READ_TIMEOUT });
    } catch (err) {
      const why = (err as Error)?.message ?? String(err);
      if (/no responders|503/i.test(why)) {
        throw new UnreachableError("unreachable", `no JetStream stream takes ${subject} on ${this.#where} (${why}): has \`interlock serve\` run there with prefix ${this.#p}? It creates the streams`, { cause: err });
      }
      if (/permission/i.test(why)) {
        throw new UnauthorizedError("unauthorized", `NATS refused to publish ${subject} (${why}): the user may not send it; see deploy/interlock-auth.conf for what each user may publish`, { cause: err });
      }
      throw new UnreachableError("unreachable", `publishing ${what} to ${subject} on ${this.#where}: ${why}`, { cause: err });
    }
    return id;
  }

  /** The last event of the stream on filter, or undefined. */
  async #last(filter: string): Promise<InterlockEvent | undefined> {
    const msgs = await this.#direct(this.#events, { last_by_subj: filter }, true);
    const m = msgs.msgs[0];
    return m === undefined ? undefined : decode(m);
  }

  /** Up to n messages of stream matching filter from sequence start on. */
  #batch(stream: string, filter: string, start: number, n: number): Promise<Batch> {
    return this.#direct(stream, { seq: start, next_by_subj: filter, batch: n }, false);
  }

  /**
   * Sends a direct get to stream and gathers its replies: req as its body,
   * or, with last, the last message on that subject, named in the
   * request's subject.
   */
  #direct(stream: string, req: object | undefined, single: boolean, last?: string): Promise<Batch> {
    const what = `stream ${stream}`;
    return new Promise<Batch>((resolve, reject) => {
      const out: Batch = { msgs: [], pending: 0 };
      const inbox = createInbox(this.#inbox);
      const timer = setTimeout(() => {
        sub.unsubscribe();
        reject(new InterlockError("no_answer", `no answer to a read of ${what} within ${seconds(READ_TIMEOUT)} on ${this.#where}: may this user read it (deploy/interlock-auth.conf), and is the NATS server 2.11 or later?`));
      }, READ_TIMEOUT);
      const finish = (err?: Error) => {
        clearTimeout(timer);
        sub.unsubscribe();
        if (err) reject(err);
        else resolve(out);
      };
      const sub = this.#nc.subscribe(inbox, {
        callback: (err, m) => {
          if (err) return finish(new InterlockError("protocol_error", `reading ${what}: ${err.message}`, { cause: err }));
          const code = m.headers?.code ?? 0;
          if (code === 0 || code === 200) {
            const seq = Number(m.headers?.get("Nats-Sequence"));
            out.msgs.push({ subject: m.headers?.get("Nats-Subject") ?? "", seq, msg: m });
            if (single) return finish();
            return;
          }
          if (code === 204) {
            out.pending = Number(m.headers?.get("Nats-Num-Pending") ?? 0);
            return finish();
          }
          if (code === 404) return finish();
          if (code === 503) {
            return finish(new UnreachableError("unreachable", `${what} does not answer on ${this.#where}: has \`interlock serve\` run there with prefix ${this.#p}? It creates the streams`));
          }
          finish(new InterlockError("protocol_error", `reading ${what}: the server answered ${code} ${m.headers?.description ?? ""}`));
        },
      });
      if (last !== undefined) this.#nc.publish(`$JS.API.DIRECT.GET.${stream}.${last}`, new Uint8Array(0), { reply: inbox });
      else this.#nc.publish(`$JS.API.DIRECT.GET.${stream}`, JSON.stringify(req), { reply: inbox });
    });
  }

  /**
   * Follows the events stream on filter, after sequence after, or from now
   * on: what the stream holds, woken by live messages on the same subjects.
   */
  async #follow(filter: string, after?: number): Promise<Follower> {
    const f = new Follower(this, filter);
    f.sub = this.#nc.subscribe(filter, { callback: () => f.wake() });
    await this.#nc.flush();
    if (after !== undefined) f.next = after + 1;
    else {
      const last = await this.#direct(this.#events, { last_by_subj: filter }, true);
      // After the last event on filter (from the first, when there is none).
      f.next = (last.msgs[0]?.seq ?? 0) + 1;
    }
    return f;
  }

  /** @internal */
  readBatch(filter: string, start: number, n: number): Promise<Batch> {
    return this.#batch(this.#events, filter, start, n);
  }
}

class Follower {
  next = 1;
  sub: { unsubscribe(): void } | undefined;
  #buf: Stored[] = [];
  #woken = false;
  #waiter: (() => void) | undefined;

  constructor(
    private readonly c: NatsInterlock,
    private readonly filter: string,
  ) {}

  /** The next stored event, or undefined when there is none yet. */
  async poll(): Promise<Stored | undefined> {
    if (this.#buf.length === 0) {
      this.#woken = false;
      const b = await this.c.readBatch(this.filter, this.next, 64);
      if (b.msgs.length === 0) return undefined;
      this.#buf = b.msgs;
      this.next = b.msgs[b.msgs.length - 1]!.seq + 1;
    }
    return this.#buf.shift();
  }

  /** Waits until a live message wakes it, ms pass, or signal aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<void> {
    if (this.#woken || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        signal?.removeEventListener("abort", done);
        this.#waiter = undefined;
        resolve();
      };
      const t = setTimeout(done, ms);
      signal?.addEventListener("abort", done);
      this.#waiter = done;
    });
  }

  wake(): void {
    this.#woken = true;
    this.#waiter?.();
  }

  stop(): void {
    this.sub?.unsubscribe();
    this.#waiter?.();
  }
}

function decode(m: Stored): InterlockEvent {
  const ce = JSON.parse(new TextDecoder().decode(m.msg.data)) as CloudEvent;
  return toEvent(m.seq, kindOf(m.subject), ce);
}

function refused(rf: Refused, what: string): InterlockError {
  const details = { flow: rf.flow, run: rf.run, ...(rf.requestId !== undefined && { requestId: rf.requestId }) };
  const msg = `Interlock refused ${what} (${rf.code}): ${rf.message}`;
  return isRefusalCode(rf.code) ? new RefusedError(rf.code, msg, details) : new InterlockError(rf.code, msg, details);
}

/** The pending list's cursors, as the Go client writes them: base64url of p1:<seq>. */
function cursor(seq: number): string {
  return Buffer.from(`p1:${seq}`).toString("base64url");
}

function parseCursor(s: string): number {
  const m = /^p1:(\d+)$/.exec(Buffer.from(s, "base64url").toString());
  if (m === null || Number(m[1]) < 1) throw new ArgumentError(`cursor ${JSON.stringify(s)} is not a pending-list cursor: pass the next of a previous page, or none for the first`);
  return Number(m[1]);
}
