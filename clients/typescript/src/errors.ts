// Errors of the client. Each says what was wrong and what to do; each is
// an InterlockError, and the subclasses let a caller tell them apart with
// instanceof.

/** The refusal codes of the protocol (docs/protocol.md §3, §6). */
export type RefusalCode =
  | "token_mismatch"
  | "stale_checkpoint"
  | "not_waiting"
  | "expired"
  | "unknown_run"
  | "invalid_answer"
  | "invalid_payload"
  | "forbidden"
  | "unknown_flow"
  | "run_exists"
  | "unsupported";

const refusalCodes: ReadonlySet<string> = new Set<RefusalCode>([
  "token_mismatch",
  "stale_checkpoint",
  "not_waiting",
  "expired",
  "unknown_run",
  "invalid_answer",
  "invalid_payload",
  "forbidden",
  "unknown_flow",
  "run_exists",
  "unsupported",
]);

/** Reports whether code is one of the protocol's refusal codes. */
export function isRefusalCode(code: string): code is RefusalCode {
  return refusalCodes.has(code);
}

/** What an InterlockError carries beside its message. */
export interface ErrorDetails {
  /** The HTTP status, for an answer of the HTTP API. */
  status?: number;
  /** The flow and run a refusal is about. */
  flow?: string;
  run?: string;
  /** The request a refusal is about. */
  requestId?: string;
  /** The problem details (RFC 9457) the HTTP API answered, as sent. */
  problem?: Record<string, unknown>;
  cause?: unknown;
}

/**
 * Every error of the client. code is the protocol's refusal code, the HTTP
 * API's problem code, or one of the client's own: unreachable, no_answer,
 * invalid_argument, invalid_receipt, protocol_error.
 */
export class InterlockError extends Error {
  override name = "InterlockError";
  readonly code: string;
  readonly status: number | undefined;
  readonly flow: string | undefined;
  readonly run: string | undefined;
  readonly requestId: string | undefined;
  readonly problem: Record<string, unknown> | undefined;

  constructor(code: string, message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = code;
    this.status = details.status;
    this.flow = details.flow;
    this.run = details.run;
    this.requestId = details.requestId;
    this.problem = details.problem;
  }
}

/**
 * Interlock refused a command: a malformed request (invalid_payload), an
 * answer that does not fit (invalid_answer, the interrupt stays pending), a
 * resume that lost a race (token_mismatch, stale_checkpoint), and so on.
 * message is Interlock's own, meant for a person.
 */
export class RefusedError extends InterlockError {
  override name = "RefusedError";
  declare readonly code: RefusalCode;
}

/** The HTTP API did not take the caller's token (401). */
export class UnauthorizedError extends InterlockError {
  override name = "UnauthorizedError";
}

/** Interlock (its NATS server, or its HTTP API) could not be reached. */
export class UnreachableError extends InterlockError {
  override name = "UnreachableError";
}

/**
 * Nothing answered in time: no Interlock worker took the command. The
 * command may still be queued, and be applied when a worker runs.
 */
export class NoAnswerError extends InterlockError {
  override name = "NoAnswerError";
}

/**
 * The approval of a gated call was taken already (409 not_waiting over
 * HTTP, the refusal not_waiting over NATS): an approval lets its call run
 * once, and another process, or this one before, ran it. Do not run the
 * tool; request the call again with a new callId to ask anew.
 */
export class ApprovalTakenError extends RefusedError {
  override name = "ApprovalTakenError";
  constructor(message: string, details: ErrorDetails = {}) {
    super("not_waiting", message, details);
  }
}

/** Why a decision's receipt does not hold. */
export type ReceiptProblem =
  /** An approved or edited decision carries no receipt. */
  | "missing"
  /** Not signed by a trusted audit key, or not a receipt at all. */
  | "invalid"
  /** Verified, but its time has passed. */
  | "expired"
  /** Verified, but it states another call, decision or args than the decision, or the decision is about another call. */
  | "mismatch"
  /** The deployment's audit keys could not be read to verify it. */
  | "no_keys";

/**
 * A gated call's decision cannot be trusted, so the call must not run: its
 * receipt is missing, does not verify with the audit keys trusted, has
 * expired, or does not state exactly the decision and the call (the
 * tool, its args, the args to run). reason says which.
 */
export class ReceiptError extends InterlockError {
  override name = "ReceiptError";
  readonly reason: ReceiptProblem;
  constructor(reason: ReceiptProblem, message: string, details: ErrorDetails = {}) {
    super("invalid_receipt", message, details);
    this.reason = reason;
  }
}

/** A call's arguments are wrong; nothing was sent. */
export class ArgumentError extends InterlockError {
  override name = "ArgumentError";
  constructor(message: string) {
    super("invalid_argument", message);
  }
}
