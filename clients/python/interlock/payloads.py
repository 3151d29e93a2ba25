"""Typed payloads of Interlock's HTTP API.

Each TypedDict is one payload of docs/schema/*.json (the wire protocol's
JSON Schemas) or of httpapi/openapi.json (the HTTP API's answers), with
the same keys; tests/test_payloads.py checks that they match, key for key,
so they cannot drift apart. Required keys are those the schema requires.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, TypedDict, Union

Kind = Literal["question", "choice", "approval"]
"""The kind of an interrupt (defs.json#/$defs/kind)."""

Verdict = Literal["approve", "edit", "reject", "respond"]
"""A person's decision on an approval (defs.json#/$defs/verdict)."""

Decision = Literal["allowed", "approved", "edited", "rejected", "responded", "expired"]
"""The tool-call gate's answer (decided.json#/properties/decision)."""

AskStatus = Literal["answered", "expired", "cancelled"]
"""How an ask settled (answered.json#/properties/status)."""

JSONObject = Dict[str, Any]


class Option(TypedDict):
    """One option of a choice (defs.json#/$defs/option)."""

    id: str
    label: str


class _QuestionRequired(TypedDict):
    field: str
    question: str


class Question(_QuestionRequired, total=False):
    """One question of a question interrupt (defs.json#/$defs/question)."""

    type: str
    suggestions: List[str]
    context: str
    schema: JSONObject


class _VoteRequired(TypedDict):
    approver: str
    verdict: Literal["approve", "edit"]
    digest: str
    at: str


class Vote(_VoteRequired, total=False):
    """One vote of an approval with a quorum (defs.json#/$defs/vote)."""

    role: str
    edits: JSONObject
    reason: str


class Policy(TypedDict, total=False):
    """What happens at a deadline (defs.json#/$defs/policy)."""

    action: Literal["expire", "reject", "approve", "escalate"]
    approverRole: str
    timeout: str
    then: "Policy"


class KeyArg(TypedDict):
    """An argument as a queue row shows it (defs.json#/$defs/keyArg)."""

    name: str
    title: str
    text: str


Quorum = Union[JSONObject, List[JSONObject]]
"""{"required": N}, or [{"role": ..., "count": ...}] (defs.json#/$defs/quorum)."""


class _ToolRequestRequired(TypedDict):
    callId: str
    tool: str


class ToolRequest(_ToolRequestRequired, total=False):
    """A tool call the gate is asked about (tool-requested.json)."""

    server: str
    args: JSONObject
    conversationId: str
    agent: str
    messages: List[Any]
    context: JSONObject
    origin: JSONObject


class _DecidedRequired(TypedDict):
    callId: str
    decision: Decision


class Decided(_DecidedRequired, total=False):
    """The gate's decision on a tool call (decided.json)."""

    tool: str
    server: str
    argsDigest: str
    args: JSONObject
    finalDigest: str
    approver: str
    reason: str
    rule: str
    origin: JSONObject
    message: str
    receipt: str


class OnTimeout(TypedDict, total=False):
    """An ask's deadline policy (ask-requested.json#/properties/interrupt/properties/onTimeout)."""

    action: Literal["expire", "reject", "approve", "escalate"]
    policy: Literal["expire", "reject", "approve", "escalate"]
    approverRole: str
    timeout: str
    then: Policy


class _AskInterruptRequired(TypedDict):
    kind: Kind


class AskInterrupt(_AskInterruptRequired, total=False):
    """What an ask asks (ask-requested.json#/properties/interrupt)."""

    title: str
    description: str
    questions: List[Question]
    context: str
    question: str
    options: List[Option]
    multiple: bool
    action: str
    args: JSONObject
    argsSchema: JSONObject
    reason: str
    approverRole: str
    decisions: List[Verdict]
    assignees: List[str]
    quorum: Quorum
    separationOfDuties: bool
    reminders: List[str]
    remindEvery: str
    timeout: str
    onTimeout: OnTimeout


class _AskRequestRequired(TypedDict):
    askId: str
    interrupt: AskInterrupt


class AskRequest(_AskRequestRequired, total=False):
    """An ask (ask-requested.json): the body of POST /v1/asks."""

    agent: str
    conversationId: str
    messages: List[Any]
    context: JSONObject
    origin: JSONObject
    callbackUrl: str


class _AnsweredRequired(TypedDict):
    askId: str
    status: AskStatus
    kind: Kind
    at: str


class Answered(_AnsweredRequired, total=False):
    """How an ask settled (answered.json)."""

    answers: JSONObject
    selected: List[str]
    decision: Verdict
    args: JSONObject
    message: str
    approver: str
    reason: str
    votes: List[Vote]
    origin: JSONObject
    receipt: str


class _InterruptedRequired(TypedDict):
    flow: str
    run: str
    node: str
    requestId: str
    resumeToken: str
    checkpoint: int
    kind: Kind


class Interrupted(_InterruptedRequired, total=False):
    """An interrupt as announced (interrupted.json); over HTTP its resumeToken is "[redacted]"."""

    questions: List[Question]
    context: str
    question: str
    options: List[Option]
    multiple: bool
    action: str
    args: JSONObject
    reason: str
    approverRole: str
    decisions: List[Verdict]
    rejectReasonRequired: bool
    gate: Literal["before", "after"]
    error: str
    title: str
    description: str
    requester: str
    argsSchema: JSONObject
    expiresAt: str
    onTimeout: Policy
    origin: JSONObject
    assignees: List[str]
    claimedBy: str
    quorum: Quorum
    separationOfDuties: bool
    votes: List[Vote]


class _PendingRequired(TypedDict):
    flow: str
    run: str
    node: str
    requestId: str
    kind: Kind
    checkpoint: int
    askedAt: str


class Pending(_PendingRequired, total=False):
    """An interrupt waiting for an answer, as the pending index holds it (pending.json)."""

    fields: List[str]
    question: str
    approverRole: str
    action: str
    title: str
    requester: str
    startedBy: str
    flowVersion: str
    keyArgs: List[KeyArg]
    expiresAt: str
    onTimeout: Policy
    assignees: List[str]
    claimedBy: str
    quorum: Quorum
    voters: List[str]
    remindedAt: str


_CloudEventRequired = TypedDict(
    "_CloudEventRequired", {"specversion": str, "id": str, "source": str, "type": str}
)


class CloudEvent(_CloudEventRequired, total=False):
    """An event Interlock published (cloudevent.json); data as its type's schema says."""

    subject: str
    time: str
    datacontenttype: str
    dataschema: str
    flow: str
    causationid: str
    traceparent: str
    tracestate: str
    data: Any


# The answers of the HTTP API (httpapi/openapi.json, components.schemas).

_ProblemRequired = TypedDict("_ProblemRequired", {"type": str, "title": str, "status": int, "code": str})


class Problem(_ProblemRequired, total=False):
    """An RFC 9457 problem: how the API says no (openapi.json Problem)."""

    detail: str
    flow: str
    run: str
    requestId: str


class _GateAnswerRequired(TypedDict):
    callId: str


class GateAnswer(_GateAnswerRequired, total=False):
    """The answer of POST /v1/gate/requests (openapi.json GateAnswer)."""

    decided: Decided
    pending: Interrupted


class _AskAnswerRequired(TypedDict):
    askId: str


class AskAnswer(_AskAnswerRequired, total=False):
    """The answer of POST /v1/asks and GET /v1/asks/{askId} (openapi.json AskAnswer)."""

    answered: Answered
    pending: Interrupted


class _InterruptPageRequired(TypedDict):
    items: List[Pending]


class InterruptPage(_InterruptPageRequired, total=False):
    """A page of GET /v1/interrupts (openapi.json InterruptPage)."""

    next: str
    total: int


class Event(TypedDict):
    """One server-sent event of GET /v1/events: its id (the events
    stream's sequence), its kind (interrupted, decided, answered, ...) and
    the CloudEvent."""

    id: int
    kind: str
    event: CloudEvent


__all__ = [
    "Answered", "AskAnswer", "AskInterrupt", "AskRequest", "AskStatus", "CloudEvent",
    "Decided", "Decision", "Event", "GateAnswer", "Interrupted", "InterruptPage",
    "JSONObject", "KeyArg", "Kind", "OnTimeout", "Option", "Pending", "Policy",
    "Problem", "Question", "Quorum", "ToolRequest", "Verdict", "Vote",
]
