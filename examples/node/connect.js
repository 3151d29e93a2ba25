// connect.js: how every script of the example reaches Interlock, with the
// client @interlockhq/client: INTERLOCK_URL (nats:// or http://; NATS_URL
// is read too), and the credentials of deploy/interlock-auth.conf's users
// (NATS_USER, NATS_PASSWORD) or an HTTP caller's token (INTERLOCK_TOKEN).
import { connect } from "@interlockhq/client";

export const URL = process.env.INTERLOCK_URL || process.env.NATS_URL || "nats://127.0.0.1:4222";

/** Interlock, as source (the CloudEvents source of what is sent over NATS). */
export function connectInterlock(source) {
  return connect(URL, {
    source,
    ...(process.env.NATS_USER && { user: process.env.NATS_USER, pass: process.env.NATS_PASSWORD }),
    ...(process.env.INTERLOCK_TOKEN && { token: process.env.INTERLOCK_TOKEN }),
  });
}

/** Prints one JSON line per step, for a person, a script or a test to follow. */
export const say = (step, fields = {}) => console.log(JSON.stringify({ step, ...fields }));

/** How long to wait for each answer and decision, in milliseconds (WAIT_SECONDS, 30 by default). */
export const WAIT_MS = 1000 * Number(process.env.WAIT_SECONDS || 30);

/**
 * The refund every agent of the example wants to make: over the $500 of
 * examples/gate/rules.yaml (rule large-refund), so a supervisor decides it
 * first.
 */
export const REFUND = { orderId: "o-1", amount: 1200, currency: "USD" };
