// The HTTP transport: Interlock's HTTP API (docs/http.md) with fetch, for
// agents that cannot hold a NATS connection (serverless functions, edge
// runtimes). The API vouches for the caller its token names: no resume
// token ever crosses HTTP.
import {
  DEFAULT_GATE_WAIT,
  DEFAULT_WAIT,
  askAnswered,
  askPending,
  checkName,
  checkWait,
  goDuration,
  isObject,
  newId,
  seconds,
  toEvent,
  toolPending,
} from "./common.js";
import {
  ApprovalTakenError,
  ArgumentError,
  InterlockError,
  NoAnswerError,
  RefusedError,
  UnauthorizedError,
  UnreachableError,
  isRefusalCode,
} from "./errors.js";
import { settleDecision, takeDecision } from "./gate.js";
import { type AuditKey, type AuditKeys, TrustedKeys } from "./receipt.js";
import type {
  AskOutcome,
  AskRequest,
  CloudEvent,
  Consumed,
  Decided,
  Interlock,
  InterlockEvent,
  Interrupted,
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

/** Options of connectHttp. */
export interface HttpOptions {
  /** The API's base URL, such as http://127.0.0.1:8080. */
  url: string;
  /**
   * The caller's bearer token, from `interlock people add NAME --token`.
   * Defaults to the environment's INTERLOCK_TOKEN, where the runtime has
   * one (Node.js, Deno, Bun); give "" to send none (an API that
   * authenticates no one, on loopback only).
   */
  token?: string;
  /** The fetch to use. Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** How long a watch waits before it reconnects, in milliseconds. Defaults to 500. */
  reconnectDelay?: number;
  /**
   * Pins the audit public keys that gated calls' receipts are verified
   * with: each as `interlock audit key` prints it (the 32 bytes in
   * standard base64, optionally prefixed with its kid and a colon), or
   * {kid, publicKey}. Defaults to the keys the deployment publishes (GET
   * /v1/audit/keys), read when a receipt is first verified.
   */
  auditKeys?: AuditKeys;
}

/** Connects to Interlock's HTTP API. Nothing is sent until the first call. */
export function connectHttp(opts: HttpOptions): Interlock {
  return new HttpInterlock(opts);
}

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

class HttpInterlock implements Interlock {
  readonly #base: string;
  readonly #token: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #reconnectDelay: number;
  readonly #keys: TrustedKeys;

  constructor(opts: HttpOptions) {
    let u: URL;
    try {
      u = new URL(opts.url);
    } catch {
      throw new ArgumentError(`url ${JSON.stringify(opts.url)} is not a URL: give the HTTP API's address, such as http://127.0.0.1:8080`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new ArgumentError(`url ${opts.url} is not http(s): give the HTTP API's address, such as http://127.0.0.1:8080 (for NATS, use connectNats)`);
    }
    this.#base = u.href.replace(/\/+$/, "");
    const token = opts.token ?? envVar("INTERLOCK_TOKEN");
    this.#token = token === undefined || token === "" ? undefined : token;
    this.#fetch = opts.fetch ?? fetch;
    this.#reconnectDelay = opts.reconnectDelay ?? 500;
    this.#keys = new TrustedKeys(opts.auditKeys, () => this.#auditKeys());
  }

  async requestToolApproval(call: ToolCall, opts: ToolApprovalOptions = {}): Promise<ToolDecision> {
    const wait = checkWait(opts.wait, DEFAULT_GATE_WAIT);
    const body = { ...call, callId: checkName("callId", call.callId ?? newId("call-")) };
    if (typeof call.tool !== "string" || call.tool === "") throw new ArgumentError("a tool call needs tool, the tool's name");
    const a = await this.#do("POST", "/v1/gate/requests", { wait: goDuration(wait) }, body, `the tool request ${body.callId}`, wait);
    if (a.status === 200 && isObject(a.body.decided)) {
      return settleDecision(body, a.body.decided as Decided, this.#keys, opts.take === false ? undefined : (id, digest) => this.#take(id, digest));
    }
    if (isObject(a.body.pending)) return toolPending(body.callId, a.body.pending as unknown as Interrupted);
    throw new NoAnswerError(
      "no_answer",
      `no Interlock worker answered the tool request ${body.callId} within ${seconds(wait)}: is \`interlock serve --gate-rules FILE\` running behind ${this.#base}? The request stays queued: ask again with the same callId`,
      { run: body.callId, flow: "gate" },
    );
  }

  async takeApproval(d: ToolDecision): Promise<Consumed> {
    return takeDecision(d, this.#keys, (id, digest) => this.#take(id, digest));
  }

  /** Takes the approval of call callId for the args of digest (POST /v1/gate/requests/{callId}/consume). */
  async #take(callId: string, digest: string): Promise<Consumed> {
    const what = `taking the approval of call ${callId}`;
    try {
      const a = await this.#do("POST", `/v1/gate/requests/${checkName("callId", callId)}/consume`, {}, { argsDigest: digest }, what, DEFAULT_WAIT);
      if (!isObject(a.body.consumed)) throw new InterlockError("protocol_error", `${what}: ${this.#base} answered ${a.status} without consumed: is it Interlock's HTTP API, of a version with receipts?`);
      return a.body.consumed as unknown as Consumed;
    } catch (err) {
      if (err instanceof RefusedError && err.code === "not_waiting") {
        throw new ApprovalTakenError(
          `call ${callId} must not run: its approval was taken already, and an approval runs its call once (${(err.problem?.detail as string | undefined) ?? err.message}); request the call again with a new callId to ask anew`,
          { status: err.status, flow: "gate", run: callId, ...(err.problem !== undefined && { problem: err.problem }), cause: err },
        );
      }
      throw err;
    }
  }

  /** The audit keys the deployment publishes (GET /v1/audit/keys). */
  async #auditKeys(): Promise<AuditKey[]> {
    const a = await this.#do("GET", "/v1/audit/keys", {}, undefined, "the audit keys", DEFAULT_WAIT);
    if (!Array.isArray(a.body.keys)) throw new InterlockError("protocol_error", `GET ${this.#base}/v1/audit/keys answered without keys: is it Interlock's HTTP API, of a version with receipts?`);
    return a.body.keys as AuditKey[];
  }

  async ask(request: AskRequest, opts: WaitOptions = {}): Promise<AskOutcome> {
    const waitAnswer = opts.wait !== undefined;
    const wait = checkWait(opts.wait, DEFAULT_WAIT);
    const body = { ...request, askId: checkName("askId", request.askId ?? newId("ask-")) };
    const a = await this.#do("POST", "/v1/asks", waitAnswer ? { wait: goDuration(wait) } : {}, body, `the ask ${body.askId}`, wait);
    return this.#askOutcome(body.askId, a, wait);
  }

  async waitForAsk(askId: string, opts: { wait: number }): Promise<AskOutcome> {
    checkName("askId", askId);
    const wait = checkWait(opts.wait, DEFAULT_WAIT);
    const a = await this.#do("GET", `/v1/asks/${askId}`, { wait: goDuration(wait) }, undefined, `the ask ${askId}`, wait);
    return this.#askOutcome(askId, a, wait);
  }

  #askOutcome(askId: string, a: Answer, wait: number): AskOutcome {
    if (a.status === 200 && isObject(a.body.answered)) return askAnswered(a.body.answered as never);
    if (isObject(a.body.pending)) return askPending(askId, a.body.pending as unknown as Interrupted);
    throw new NoAnswerError(
      "no_answer",
      `no Interlock worker answered the ask ${askId} within ${seconds(wait)}: is \`interlock serve\` running behind ${this.#base}? The ask stays queued: ask again with the same askId, or waitForAsk`,
      { run: askId, flow: "ask" },
    );
  }

  async start(flow: string, opts: StartOptions = {}): Promise<RunOutcome> {
    checkName("flow", flow);
    const wait = checkWait(opts.wait, DEFAULT_WAIT);
    const body: Record<string, unknown> = {};
    if (opts.run !== undefined) body.run = checkName("run", opts.run);
    if (opts.state !== undefined) body.state = opts.state;
    if (opts.origin !== undefined) body.origin = opts.origin;
    const a = await this.#do("POST", `/v1/runs/${flow}`, { wait: goDuration(wait) }, body, `the start of ${flow}`, wait);
    return outcome(a.body);
  }

  async resume(flow: string, run: string, resume: ResumeInput, opts: WaitOptions = {}): Promise<RunOutcome> {
    checkName("flow", flow);
    checkName("run", run);
    const wait = checkWait(opts.wait, DEFAULT_WAIT);
    const a = await this.#do("POST", `/v1/runs/${flow}/${run}/resume`, { wait: goDuration(wait) }, resume, `the resume of ${flow} ${run}`, wait);
    return outcome(a.body);
  }

  async listPending(q: PendingQuery = {}): Promise<PendingPage> {
    const query: Record<string, string | string[]> = {};
    if (q.flow !== undefined) query.flow = checkName("flow", q.flow);
    if (q.kind !== undefined) query.kind = ([] as string[]).concat(q.kind);
    if (q.role !== undefined) query.role = ([] as string[]).concat(q.role);
    if (q.limit !== undefined) query.limit = String(q.limit);
    if (q.cursor !== undefined && q.cursor !== "") query.cursor = q.cursor;
    const a = await this.#do("GET", "/v1/interrupts", query, undefined, "the pending list", DEFAULT_WAIT);
    const page: PendingPage = { items: (a.body.items as PendingPage["items"]) ?? [] };
    if (typeof a.body.next === "string") page.next = a.body.next;
    if (typeof a.body.total === "number") page.total = a.body.total;
    return page;
  }

  watch(q: WatchQuery = {}, opts: WatchOptions = {}): AsyncIterableIterator<InterlockEvent> {
    if (q.flow !== undefined) checkName("flow", q.flow);
    if (q.run !== undefined) {
      if (q.flow === undefined) throw new ArgumentError("watch: run needs flow");
      checkName("run", q.run);
    }
    const query: Record<string, string | string[]> = {};
    if (q.flow !== undefined) query.flow = q.flow;
    if (q.run !== undefined) query.run = q.run;
    if (q.kinds !== undefined && q.kinds.length > 0) query.kind = q.kinds;
    return this.#watch(query, q.after, opts.signal, opts.onReady);
  }

  async *#watch(query: Record<string, string | string[]>, after: number | undefined, signal: AbortSignal | undefined, onReady: (() => void) | undefined): AsyncGenerator<InterlockEvent> {
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener("abort", onAbort);
    let last = after === undefined ? undefined : String(after);
    let failures = 0;
    try {
      while (!stop.signal.aborted) {
        let res: Response;
        try {
          const headers: Record<string, string> = { accept: "text/event-stream" };
          if (last !== undefined) headers["last-event-id"] = last;
          res = await this.#fetch(this.#url("/v1/events", query), { headers: this.#headers(headers), signal: stop.signal });
        } catch (err) {
          if (stop.signal.aborted) return;
          if (++failures > 1) throw this.#unreachable(err);
          await delay(this.#reconnectDelay, stop.signal);
          continue;
        }
        if (!res.ok) throw await this.#problem(res, "the events");
        failures = 0;
        // The server fixed where the stream starts before it answered.
        onReady?.();
        onReady = undefined;
        try {
          for await (const m of sse(res.body!)) {
            if (m.id !== undefined) last = m.id;
            if (m.event === undefined || m.data === undefined) continue;
            const ce = JSON.parse(m.data) as CloudEvent;
            yield toEvent(Number(m.id ?? 0), m.event, ce);
          }
        } catch (err) {
          if (stop.signal.aborted) return;
          // The connection broke: reconnect from the last id.
        }
        if (stop.signal.aborted) return;
        await delay(this.#reconnectDelay, stop.signal);
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      stop.abort();
    }
  }

  async close(): Promise<void> {}

  #url(path: string, query: Record<string, string | string[]>): string {
    const u = new URL(this.#base + path);
    for (const [k, v] of Object.entries(query)) {
      for (const x of ([] as string[]).concat(v)) u.searchParams.append(k, x);
    }
    return u.href;
  }

  #headers(h: Record<string, string>): Record<string, string> {
    if (this.#token !== undefined) h.authorization = `Bearer ${this.#token}`;
    return h;
  }

  async #do(method: string, path: string, query: Record<string, string | string[]>, body: unknown, what: string, wait: number): Promise<Answer> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await this.#fetch(this.#url(path, query), {
        method,
        headers: this.#headers(headers),
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(wait + 30_000),
      });
    } catch (err) {
      if ((err as Error)?.name === "TimeoutError") {
        throw new NoAnswerError("no_answer", `${this.#base} did not answer ${method} ${path} within ${seconds(wait + 30_000)}: is a proxy in front of it holding the request?`, { cause: err });
      }
      throw this.#unreachable(err);
    }
    if (res.status >= 400) throw await this.#problem(res, what);
    const text = await res.text();
    try {
      const v = JSON.parse(text) as unknown;
      if (isObject(v)) return { status: res.status, body: v };
    } catch {
      // below
    }
    throw new InterlockError(
      "protocol_error",
      `${method} ${this.#base}${path} answered ${res.status} with ${JSON.stringify(text.slice(0, 80))}, not a JSON object: is ${this.#base} Interlock's HTTP API?`,
      { status: res.status },
    );
  }

  #unreachable(err: unknown): UnreachableError {
    const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
    const why = cause?.code ?? cause?.message ?? (err as Error)?.message ?? String(err);
    return new UnreachableError(
      "unreachable",
      `cannot reach Interlock's HTTP API at ${this.#base} (${why}): is \`interlock serve\` running, listening there (--http HOST:PORT)?`,
      { cause: err },
    );
  }

  async #problem(res: Response, what: string): Promise<InterlockError> {
    const text = await res.text().catch(() => "");
    let p: Record<string, unknown> | undefined;
    try {
      const v = JSON.parse(text) as unknown;
      if (isObject(v)) p = v;
    } catch {
      // not JSON
    }
    const code = typeof p?.code === "string" ? p.code : `http_${res.status}`;
    const detail = typeof p?.detail === "string" ? p.detail : text.slice(0, 200) || res.statusText;
    const details = {
      status: res.status,
      ...(p !== undefined && { problem: p }),
      ...(typeof p?.flow === "string" && { flow: p.flow }),
      ...(typeof p?.run === "string" && { run: p.run }),
      ...(typeof p?.requestId === "string" && { requestId: p.requestId }),
    };
    if (res.status === 401) {
      const how =
        this.#token === undefined
          ? "no token was sent, and this API authenticates its callers: set INTERLOCK_TOKEN (or pass token) to one that `interlock people add NAME --token --people FILE` printed"
          : "the token is not in the server's directory of people; add a caller with `interlock people add NAME --token --people FILE` and set INTERLOCK_TOKEN (or pass token) to the token it prints";
      return new UnauthorizedError(code, `Interlock answered 401 ${code} to ${what}: ${how}`, details);
    }
    if (isRefusalCode(code)) {
      return new RefusedError(code, `Interlock refused ${what} (${res.status} ${code}): ${detail}`, details);
    }
    if (code === "cross_origin") {
      return new InterlockError(code, `Interlock answered 403 cross_origin to ${what}: ${detail} (an API without an auth file answers only requests to a loopback host: use http://127.0.0.1:PORT)`, details);
    }
    return new InterlockError(code, `Interlock answered ${res.status} ${code} to ${what}: ${detail}`, details);
  }
}

function outcome(b: Record<string, unknown>): RunOutcome {
  const out: RunOutcome = { flow: String(b.flow), run: String(b.run), outcome: b.outcome as RunOutcome["outcome"] };
  if (isObject(b.event)) out.event = toEvent(0, out.outcome, b.event as unknown as CloudEvent);
  return out;
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

interface SseMessage {
  id?: string;
  event?: string;
  data?: string;
}

/** Parses a text/event-stream body into its messages. */
async function* sse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buf = "";
  let m: SseMessage = {};
  let data: string[] = [];
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
      if (line === "") {
        if (data.length > 0) m.data = data.join("\n");
        if (m.id !== undefined || m.data !== undefined) yield m;
        m = {};
        data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "id") m.id = value;
      else if (field === "event") m.event = value;
      else if (field === "data") data.push(value);
    }
  }
}

/**
 * The environment variable name, where the runtime has an environment
 * (Node.js, Deno and Bun have process.env); undefined elsewhere (a
 * browser).
 */
export function envVar(name: string): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return env?.[name];
}
