package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/interlockhq/interlock/protocol"
)

// ProblemType begins the type URI of every problem the API answers with:
// the type of a problem with code forbidden is ProblemType + "forbidden",
// a section of docs/http.md. A code this version does not know (a refusal
// from a newer worker) links to the Problems section, ProblemType +
// "problems".
const ProblemType = "https://github.com/interlockhq/interlock/blob/main/docs/http.md#"

// problemsSection is the anchor of docs/http.md's Problems section.
const problemsSection = "problems"

// Codes of problems that are not refusals of the protocol. A refusal keeps
// the protocol's code (forbidden, expired, token_mismatch, ...).
const (
	// CodeInvalidName: a flow or run in the path breaks the name rules.
	CodeInvalidName = "invalid_name"
	// CodeInvalidQuery: a query parameter or header is unknown or wrong.
	CodeInvalidQuery = "invalid_query"
	// CodeInvalidPayload: the body is not what the route takes.
	CodeInvalidPayload = "invalid_payload"
	// CodeUnauthorized: no bearer token, or one no caller holds.
	CodeUnauthorized = "unauthorized"
	// CodeCrossOrigin: a browser's cross-site request, or, without an auth
	// file, a request that names a host other than the loopback one.
	CodeCrossOrigin = "cross_origin"
	// CodeNotFound: no route has that path.
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed: the route takes another method.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeUnavailable: Interlock could not be reached over NATS.
	CodeUnavailable = "unavailable"
	// CodeInternal: the API failed; the log says why.
	CodeInternal = "internal"
)

// Refusal codes of the protocol (docs/protocol.md, Refusals), as problem
// codes.
const (
	codeTokenMismatch   = string(protocol.CodeTokenMismatch)
	codeStaleCheckpoint = string(protocol.CodeStaleCheckpoint)
	codeNotWaiting      = string(protocol.CodeNotWaiting)
	codeExpired         = string(protocol.CodeExpired)
	codeUnknownRun      = string(protocol.CodeUnknownRun)
	codeUnknownFlow     = string(protocol.CodeUnknownFlow)
	codeInvalidAnswer   = string(protocol.CodeInvalidAnswer)
	codeForbidden       = string(protocol.CodeForbidden)
	codeRunExists       = string(protocol.CodeRunExists)
	codeUnsupported     = string(protocol.CodeUnsupported)
)

// StatusOf returns the HTTP status of a problem code: a refusal's code or
// one of the API's own.
func StatusOf(code string) int {
	switch code {
	case CodeInvalidName, CodeInvalidQuery, CodeInvalidPayload:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeCrossOrigin:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	// A refusal of the protocol is answered as on every surface.
	return protocol.Code(code).HTTPStatus()
}

// titles are the problems' titles: what happened, the same for every
// occurrence; Detail says what happened this time.
var titles = map[string]string{
	CodeInvalidName:      "Invalid flow or run name",
	CodeInvalidQuery:     "Invalid query parameter or header",
	CodeInvalidPayload:   "Invalid request body",
	CodeUnauthorized:     "Missing or unknown bearer token",
	CodeCrossOrigin:      "Cross-origin request refused",
	CodeNotFound:         "No such route",
	CodeMethodNotAllowed: "Method not allowed on this route",
	CodeUnavailable:      "Interlock unavailable",
	CodeInternal:         "Internal error",
	codeTokenMismatch:    "Another request is pending",
	codeStaleCheckpoint:  "The run has moved on",
	codeNotWaiting:       "The run is not waiting",
	codeExpired:          "The interrupt expired",
	codeUnknownRun:       "No such run",
	codeUnknownFlow:      "No such flow",
	codeInvalidAnswer:    "The answer does not fit the interrupt",
	codeForbidden:        "Forbidden: the caller may not decide this approval",
	codeRunExists:        "The run exists",
	codeUnsupported:      "Not served by this deployment",
}

// Problem is an RFC 9457 problem details object, served as
// application/problem+json, with the code of the refusal or error and,
// for a refusal, the run and request it concerns.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Code is the protocol's refusal code, or one of the API's own codes.
	Code      string `json:"code"`
	Flow      string `json:"flow,omitempty"`
	Run       string `json:"run,omitempty"`
	RequestID string `json:"requestId,omitempty"`
}

// newProblem returns the problem of code with detail. Its type links to
// the code's section of docs/http.md, or to the Problems section for a
// code the docs do not describe.
func newProblem(code, detail string) Problem {
	title, ok := titles[code]
	anchor := code
	if !ok {
		title, anchor = http.StatusText(StatusOf(code)), problemsSection
	}
	return Problem{Type: ProblemType + anchor, Title: title, Status: StatusOf(code), Detail: detail, Code: code}
}

// tooLarge is the problem of a body, or of the command it makes, too large
// for one NATS message: invalid_payload, answered 413.
func tooLarge(detail string) Problem {
	p := newProblem(CodeInvalidPayload, detail)
	p.Status = http.StatusRequestEntityTooLarge
	return p
}

// writeProblem answers with p.
func writeProblem(w http.ResponseWriter, p Problem) {
	body, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="interlock"`)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, newProblem(CodeInternal, "encoding the answer: "+err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
