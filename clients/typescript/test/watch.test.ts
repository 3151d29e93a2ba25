// A watch over HTTP whose connection breaks reconnects with Last-Event-ID
// and carries on: no event missed, none repeated.
import assert from "node:assert/strict";
import { test } from "node:test";
import { connectHttp, type InterlockEvent } from "../src/index.js";
import { WAIT, httpUrl, id, token } from "./env.js";

test("an HTTP watch whose connection breaks reconnects from the last event it delivered", async () => {
  const c = connectHttp({ url: httpUrl, token });
  const askId = id("ask-");
  await c.ask({ askId, interrupt: { kind: "question", questions: [{ field: "a", question: "A?" }, { field: "b", question: "B?" }] } });
  await c.resume("ask", askId, { answers: { a: "1" } }, { wait: WAIT });
  await c.resume("ask", askId, { answers: { b: "2" } }, { wait: WAIT });
  await c.waitForAsk(askId, { wait: WAIT });

  // Every connection to /v1/events is cut right after its first chunk that
  // holds an event, as a dropped connection would be.
  const lastEventIds: Array<string | null> = [];
  const breaking: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (!String(input).includes("/v1/events")) return res;
    lastEventIds.push(new Headers(init?.headers).get("last-event-id"));
    const reader = res.body!.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(ctl) {
        const { value, done } = await reader.read();
        if (done) return ctl.close();
        ctl.enqueue(value);
        if (new TextDecoder().decode(value).includes("event:")) {
          await reader.cancel();
          ctl.error(new Error("connection reset"));
        }
      },
      cancel: (why) => reader.cancel(why),
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };

  const read = async (c2: ReturnType<typeof connectHttp>): Promise<InterlockEvent[]> => {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), WAIT);
    const seen: InterlockEvent[] = [];
    try {
      for await (const e of c2.watch({ flow: "ask", run: askId, after: 0 }, { signal: ctl.signal })) {
        seen.push(e);
        if (e.kind === "answered") break;
      }
    } finally {
      clearTimeout(t);
    }
    return seen;
  };
  const want = await read(c);
  const got = await read(connectHttp({ url: httpUrl, token, fetch: breaking, reconnectDelay: 10 }));
  assert.deepEqual(got.map((e) => e.seq), want.map((e) => e.seq));
  assert.ok(lastEventIds.length >= 2, `the watch connected ${lastEventIds.length} time(s); the test meant to break it`);
  assert.equal(lastEventIds[0], "0");
  assert.ok(lastEventIds.slice(1).every((x) => x !== null && Number(x) > 0), `reconnected with Last-Event-ID ${lastEventIds}`);
});
