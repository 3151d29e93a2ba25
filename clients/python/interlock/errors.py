"""The errors of the Interlock client: each says what was wrong and what to do."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .payloads import Answered, Decided, Interrupted, Problem

_TOKEN_HELP = (
    "send a bearer token: set INTERLOCK_TOKEN, or pass Client(token=...), to a token "
    "from `interlock people add NAME --role ROLE --token --people FILE` (run it where "
    "`interlock serve --people FILE` runs)"
)


class InterlockError(Exception):
    """Every error of this package."""


class Unreachable(InterlockError, ConnectionError):
    """The HTTP API could not be reached (refused, reset, timed out, no such host)."""

    def __init__(self, url: str, reason: str):
        self.url = url
        self.reason = reason
        super().__init__(
            f"cannot reach Interlock at {url}: {reason}; is `interlock serve` running there? "
            "Start it, or point the client at it with INTERLOCK_URL or Client(url=...)"
        )


class ProblemError(InterlockError):
    """The API refused a request: an RFC 9457 problem with Interlock's code.

    code is the protocol's refusal code (invalid_answer, forbidden, expired,
    not_waiting, ...) or one of the API's own (invalid_payload,
    unauthorized, ...); detail says what was wrong this time. docs/http.md's
    Problems section (the problem's type links to it) says what each means.
    """

    def __init__(self, method: str, path: str, status: int, problem: Problem, hint: str = ""):
        self.method = method
        self.path = path
        self.status = status
        self.problem = problem
        self.code: str = problem.get("code", "")
        self.title: str = problem.get("title", "")
        self.detail: str = problem.get("detail", "")
        self.type: str = problem.get("type", "")
        self.flow: Optional[str] = problem.get("flow")
        self.run: Optional[str] = problem.get("run")
        self.request_id: Optional[str] = problem.get("requestId")
        msg = f"{method} {path}: {status} {self.code}"
        if self.detail:
            msg += f": {self.detail}"
        elif self.title:
            msg += f": {self.title}"
        if hint:
            msg += f"; {hint}"
        if self.type:
            msg += f" (see {self.type})"
        super().__init__(msg)


class Unauthorized(ProblemError):
    """401: no bearer token, or one no caller of the API's auth file holds."""

    def __init__(self, method: str, path: str, status: int, problem: Problem):
        super().__init__(method, path, status, problem, _TOKEN_HELP)


class NotApproved(InterlockError):
    """A tool call or an approval that must not run: rejected, responded to,
    or expired. str(error) is a sentence to tell the model."""


class ApprovalRejected(NotApproved):
    """The approver rejected the call; approver and reason say who and why."""

    def __init__(self, action: str, approver: str, reason: str, call_id: str = "", decided: Optional[Decided] = None, answered: Optional[Answered] = None):
        self.action = action
        self.approver = approver
        self.reason = reason
        self.call_id = call_id
        self.decided = decided
        self.answered = answered
        msg = f"{action} was rejected by {approver or 'an approver'}"
        if reason:
            msg += f": {reason}"
        super().__init__(msg)


class ApprovalResponded(NotApproved):
    """The approver did not run the call but answered with a message, what
    they want done instead."""

    def __init__(self, action: str, approver: str, message: str, call_id: str = "", decided: Optional[Decided] = None, answered: Optional[Answered] = None):
        self.action = action
        self.approver = approver
        self.message = message
        self.call_id = call_id
        self.decided = decided
        self.answered = answered
        super().__init__(f"{action} was not run; {approver or 'the approver'} answered: {message}")


class ApprovalExpired(NotApproved):
    """Nobody decided before the approval's deadline; the call must not run."""

    def __init__(self, action: str, reason: str = "", call_id: str = "", decided: Optional[Decided] = None, answered: Optional[Answered] = None):
        self.action = action
        self.reason = reason
        self.call_id = call_id
        self.decided = decided
        self.answered = answered
        msg = f"{action} was not run: nobody approved it before its deadline"
        if reason:
            msg += f" ({reason})"
        super().__init__(msg)


class ReceiptError(InterlockError):
    """A gated call's decision cannot be trusted, so the call did not run:
    its receipt is missing, does not verify with the audit keys trusted,
    has expired, or does not state exactly the decision and the call (the
    tool, its args, the args to run). reason says which: "missing",
    "invalid", "expired", "mismatch", or "no_keys" (the deployment's audit
    keys could not be read: pin its key, Client(audit_keys=...))."""

    def __init__(self, reason: str, message: str):
        self.reason = reason
        super().__init__(message)


class ApprovalTaken(InterlockError):
    """The approval of a gated call was taken already (409 not_waiting): an
    approval runs its call once, and it ran. The tool did not run again;
    make the call again with a new call_id to ask anew."""

    def __init__(self, call_id: str, detail: str, problem: Optional[Problem] = None):
        self.call_id = call_id
        self.detail = detail
        self.problem = problem
        super().__init__(
            f"call {call_id} did not run: its approval was taken already, and an approval runs its call once ({detail}); "
            "make the call again with a new call_id to ask anew"
        )


class StillPending(InterlockError, TimeoutError):
    """The wait ended and nobody had answered yet. The request stays open:
    wait again with the same id (request_tool(..., call_id=...) or
    wait_for(ask_id)); it is never asked twice."""

    def __init__(self, what: str, id: str, waited: float, pending: Optional[Interrupted] = None):
        self.id = id
        self.waited = waited
        self.pending = pending
        super().__init__(
            f"{what} {id} is still waiting for an answer after {waited:g}s; "
            f"wait again with the same id (it is never asked twice), or answer it in the inbox"
        )


class ApprovalPending(StillPending):
    """A tool call is still waiting for its approval after the wait."""

    def __init__(self, call_id: str, waited: float, pending: Optional[Interrupted] = None):
        self.call_id = call_id
        super().__init__("tool call", call_id, waited, pending)


class AskPending(StillPending):
    """An ask is still waiting for its answer after the wait: wait_for(ask_id) later."""

    def __init__(self, ask_id: str, waited: float, pending: Optional[Interrupted] = None):
        self.ask_id = ask_id
        super().__init__("ask", ask_id, waited, pending)


class AskNotAnswered(InterlockError):
    """An ask settled without an answer: expired or cancelled."""

    def __init__(self, answered: Answered, msg: str):
        self.answered = answered
        self.ask_id = answered.get("askId", "")
        self.status = answered.get("status", "")
        super().__init__(msg)


class AskExpired(AskNotAnswered):
    """Nobody answered the ask before its deadline."""

    def __init__(self, answered: Answered):
        super().__init__(answered, f"ask {answered.get('askId')} expired: nobody answered it before its deadline")


class AskCancelled(AskNotAnswered):
    """The ask was cancelled before anyone answered it."""

    def __init__(self, answered: Answered):
        super().__init__(answered, f"ask {answered.get('askId')} was cancelled before anyone answered it")


class ProtocolError(InterlockError):
    """The API answered with something this client does not understand:
    not the JSON it expects. Is the URL Interlock's HTTP API?"""


def _problem_error(method: str, path: str, status: int, body: Dict[str, Any]) -> ProblemError:
    problem: Problem = body  # type: ignore[assignment]
    if status == 401:
        return Unauthorized(method, path, status, problem)
    return ProblemError(method, path, status, problem)
