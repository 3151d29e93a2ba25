// a2a.js: an agent of any runtime asks a person through Interlock over
// A2A, with the official A2A JavaScript SDK (@a2a-js/sdk): Interlock is
// just another A2A agent to it, one whose work is asking people.
//
//   node a2a.js stream "Which warehouse should ship order 7?"   the task, then the answer
//   node a2a.js send "May I close ticket 12?"                   the task, at once
//   node a2a.js get <task id>                                   the task as it stands
//
// INTERLOCK_URL is Interlock's HTTP API, where its Agent Card is (an
// http:// or https:// URL; default http://127.0.0.1:8080, as A2A speaks
// HTTP, not NATS); INTERLOCK_TOKEN, if set, is sent as the bearer token (a
// token of the directory of people). Each step is a JSON line.
import { randomUUID } from "node:crypto";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

const url = process.env.INTERLOCK_URL ?? "";
const base = /^https?:\/\//.test(url) ? url : "http://127.0.0.1:8080";
const token = process.env.INTERLOCK_TOKEN;

// authFetch sends the token with every request, the card's included.
const authFetch = (url, init = {}) => {
  const headers = new Headers(init.headers);
  if (token) headers.set("Authorization", `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

const say = (step, fields) => console.log(JSON.stringify({ step, ...fields }));

// answerOf is the data of a task's answer artifact, if it has one.
const answerOf = (artifacts = []) =>
  artifacts.find((a) => a.artifactId === "answer")?.parts.find((p) => p.kind === "data")?.data;

const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
  }),
);
const client = await factory.createFromUrl(base);
const [mode = "stream", arg = "Which warehouse should ship order 7?"] = process.argv.slice(2);
const message = () => ({
  kind: "message",
  role: "user",
  messageId: randomUUID(),
  parts: [{ kind: "text", text: arg }],
});

switch (mode) {
  case "stream":
    for await (const ev of client.sendMessageStream({ message: message() })) {
      if (ev.kind === "task") say("task", { id: ev.id, state: ev.status.state });
      else if (ev.kind === "artifact-update") say("answer", { data: answerOf([ev.artifact]) });
      else if (ev.kind === "status-update" && ev.final) say("done", { state: ev.status.state });
    }
    break;
  case "send": {
    const task = await client.sendMessage({ message: message(), configuration: { blocking: false } });
    say("task", { id: task.id, state: task.status.state });
    break;
  }
  case "get": {
    const task = await client.getTask({ id: arg });
    say("task", { id: task.id, state: task.status.state, answer: answerOf(task.artifacts) });
    break;
  }
  default:
    console.error(`a2a.js: unknown mode ${JSON.stringify(mode)}: use stream, send or get`);
    process.exit(2);
}
