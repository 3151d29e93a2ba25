// Errors that say what to do.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { connectHttp, connectNats, NoAnswerError, UnauthorizedError, UnreachableError } from "../src/index.js";
import { WAIT, closedPort, httpUrl, idleNatsUrl } from "./env.js";

describe("errors", () => {
  it("says a token the server does not know is unauthorized, and how to add one", async () => {
    const c = connectHttp({ url: httpUrl, token: "not-a-token-of-this-server" });
    await assert.rejects(c.requestToolApproval({ tool: "issue_refund", args: { amount: 1 } }, { wait: WAIT }), (err: unknown) => {
      assert.ok(err instanceof UnauthorizedError, `not an UnauthorizedError: ${err}`);
      assert.equal(err.status, 401);
      assert.equal(err.code, "unauthorized");
      assert.match(err.message, /interlock people add NAME --token/);
      return true;
    });
  });

  it("says an HTTP API nobody listens on is unreachable, and where it looked", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const c = connectHttp({ url });
    await assert.rejects(c.ask({ interrupt: { kind: "question", questions: [{ field: "x", question: "X?" }] } }), (err: unknown) => {
      assert.ok(err instanceof UnreachableError, `not an UnreachableError: ${err}`);
      assert.ok(err.message.includes(url), err.message);
      assert.match(err.message, /interlock serve/);
      return true;
    });
  });

  it("says a NATS server nobody listens on is unreachable, and where it looked", async () => {
    const url = `nats://127.0.0.1:${await closedPort()}`;
    await assert.rejects(connectNats({ servers: url }), (err: unknown) => {
      assert.ok(err instanceof UnreachableError, `not an UnreachableError: ${err}`);
      assert.ok(err.message.includes(url), err.message);
      return true;
    });
  });

  it("says no worker answered an ask in time, on which subject, and where", async () => {
    const c = await connectNats({ servers: idleNatsUrl });
    try {
      await assert.rejects(c.ask({ interrupt: { kind: "question", questions: [{ field: "x", question: "X?" }] } }, { wait: 500 }), (err: unknown) => {
        assert.ok(err instanceof NoAnswerError, `not a NoAnswerError: ${err}`);
        assert.match(err.message, /^no Interlock worker answered on interlock\.in\.ask\.request within 0\.5s: is `interlock serve` running and reachable at /);
        assert.ok(err.message.includes(idleNatsUrl), err.message);
        return true;
      });
    } finally {
      await c.close();
    }
  });
});
