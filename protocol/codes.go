package protocol

// Code is the code of a refused event: why a command was not applied.
type Code string

// Refusal codes (docs/protocol.md §3, Refusals).
const (
	CodeTokenMismatch   Code = "token_mismatch"
	CodeStaleCheckpoint Code = "stale_checkpoint"
	CodeNotWaiting      Code = "not_waiting"
	CodeUnknownRun      Code = "unknown_run"
	CodeExpired         Code = "expired"
	CodeInvalidAnswer   Code = "invalid_answer"
	CodeForbidden       Code = "forbidden"
	CodeInvalidPayload  Code = "invalid_payload"
	// CodeUnknownFlow: the flow is not registered. An extension of the
	// original list, used on start.
	CodeUnknownFlow Code = "unknown_flow"
	// CodeRunExists: a start names a run that already exists. An extension
	// of the original list.
	CodeRunExists Code = "run_exists"
	// CodeUnsupported: the deployment does not serve what the command
	// asks (a tool request while the tool-call gate is off). An extension
	// of the original list.
	CodeUnsupported Code = "unsupported"
)

// Codes returns every refusal code.
func Codes() []Code {
	return []Code{CodeTokenMismatch, CodeStaleCheckpoint, CodeNotWaiting, CodeUnknownRun, CodeExpired,
		CodeInvalidAnswer, CodeForbidden, CodeInvalidPayload, CodeUnknownFlow, CodeRunExists, CodeUnsupported}
}
