// @interlockhq/client: Interlock from TypeScript. Gate an agent's tool
// calls, ask people questions, start and resume flows, follow events and
// list what waits, over NATS (connectNats) or Interlock's HTTP API
// (connectHttp), behind one interface (Interlock).
import { ArgumentError } from "./errors.js";
import { connectHttp, type HttpOptions } from "./http.js";
import { connectNats, type NatsOptions } from "./nats.js";
import type { Interlock } from "./types.js";

export * from "./errors.js";
export * from "./types.js";
export { connectHttp, type HttpOptions } from "./http.js";
export { connectNats, type NatsOptions } from "./nats.js";
export {
  RECEIPT_TYPE,
  argsDigest,
  auditKeyId,
  canonicalJson,
  checkDecided,
  parseAuditKey,
  verifyDecided,
  verifyReceipt,
  type AuditKey,
  type AuditKeys,
  type DecidedCall,
  type Receipt,
} from "./receipt.js";

/**
 * Connects to Interlock at url: nats:// (or tls://) over NATS, http(s)://
 * over the HTTP API. The options are those of connectNats or connectHttp.
 */
export async function connect(
  url: string,
  opts: Omit<NatsOptions, "servers"> & Omit<HttpOptions, "url"> = {},
): Promise<Interlock> {
  if (/^https?:\/\//i.test(url)) return connectHttp({ ...opts, url });
  if (/^(nats|tls|wss?):\/\//i.test(url)) return connectNats({ ...opts, servers: url });
  throw new ArgumentError(`${JSON.stringify(url)} is neither a NATS URL (nats://127.0.0.1:4222) nor an HTTP one (http://127.0.0.1:8080)`);
}
