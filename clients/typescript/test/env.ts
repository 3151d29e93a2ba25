// What the tests share: the service the Go test started, and a client of
// each transport on it.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { connectHttp, connectNats, type Interlock } from "../src/index.js";

function need(name: string): string {
  const v = process.env[name];
  if (v === undefined || v === "") {
    throw new Error(`${name} is not set: run these tests with \`go test ./clients/typescript\`, which starts Interlock and sets it`);
  }
  return v;
}

export const natsUrl = need("INTERLOCK_NATS_URL");
/** A deployment whose workers have stopped. */
export const idleNatsUrl = need("INTERLOCK_IDLE_NATS_URL");
export const httpUrl = need("INTERLOCK_HTTP_URL");
export const token = need("INTERLOCK_TOKEN");
/** Bounds every wait of the tests. */
export const WAIT = Number(process.env.INTERLOCK_TEST_WAIT_MS ?? 15_000);
/** The caller the token names: the approver of HTTP decisions. */
export const httpCaller = "ts-test";

/** A transport under test: how to connect, and who its decisions are by. */
export interface Transport {
  name: "nats" | "http";
  connect(): Promise<Interlock>;
  /** What a resume names as approver: over NATS, the body's approver; over HTTP, none (the caller is). */
  approver: { approver?: string };
  /** Who the decision is recorded as made by. */
  decidedBy: string;
}

export const transports: Transport[] = [
  { name: "nats", connect: () => connectNats({ servers: natsUrl, source: "/agents/ts-test" }), approver: { approver: "ts-bot" }, decidedBy: "ts-bot" },
  { name: "http", connect: async () => connectHttp({ url: httpUrl, token }), approver: {}, decidedBy: httpCaller },
];

/** A fresh id. */
export function id(prefix: string): string {
  return prefix + randomBytes(6).toString("hex");
}

/** Polls cond until it returns a value, failing after WAIT. */
export async function eventually<T>(what: string, cond: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + WAIT;
  let delay = 20;
  for (;;) {
    const v = await cond();
    if (v !== undefined) return v;
    assert.ok(Date.now() < deadline, `${what}: not within ${WAIT} ms`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 250);
  }
}

/** Waits until flow's run waits on an interrupt, as the pending list says. */
export async function pendingOf(c: Interlock, flow: string, run: string): Promise<void> {
  await eventually(`${flow} ${run} in the pending list`, async () => {
    for (let cursor: string | undefined; ; ) {
      const page = await c.listPending({ flow, limit: 1000, ...(cursor !== undefined && { cursor }) });
      if (page.items.some((p) => p.run === run)) return true;
      if (page.next === undefined) return undefined;
      cursor = page.next;
    }
  });
}

/** A loopback port nothing listens on. */
export async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

/**
 * Waits until flow's run has announced its interrupt: its interrupted
 * event is on the events stream, where a resume over NATS reads the token.
 * (The pending list may show the run a moment before.)
 */
export async function interruptedOf(c: Interlock, flow: string, run: string): Promise<void> {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), WAIT);
  try {
    for await (const _ of c.watch({ flow, run, kinds: ["interrupted"], after: 0 }, { signal: ctl.signal })) return;
  } finally {
    clearTimeout(t);
  }
  assert.fail(`${flow} ${run} announced no interrupt within ${WAIT} ms`);
}
