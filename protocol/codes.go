package protocol

import "net/http"

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

// HTTPStatus is the status a refusal of code is answered with wherever
// Interlock answers over HTTP (the HTTP API, callback URLs, the inbox's
// pages and decision links): docs/protocol.md §7.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeInvalidPayload:
		return http.StatusBadRequest
	case CodeForbidden:
		return http.StatusForbidden
	case CodeUnknownRun, CodeUnknownFlow:
		return http.StatusNotFound
	case CodeStaleCheckpoint, CodeTokenMismatch, CodeNotWaiting, CodeRunExists:
		return http.StatusConflict
	case CodeExpired:
		return http.StatusGone
	case CodeInvalidAnswer:
		return http.StatusUnprocessableEntity
	case CodeUnsupported:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}
