"""A client of Interlock's HTTP API, on the Python standard library alone."""

from __future__ import annotations

import asyncio
import functools
import http.client
import inspect
import json
import os
import socket
import ssl
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, TypeVar, Union
from urllib.parse import quote, urlencode, urlsplit

from .errors import (
    AskCancelled,
    AskExpired,
    AskPending,
    ApprovalExpired,
    ApprovalPending,
    ApprovalRejected,
    ApprovalResponded,
    ApprovalTaken,
    InterlockError,
    ProblemError,
    ReceiptError,
    ProtocolError,
    Unreachable,
    _problem_error,
)
from .payloads import (
    Answered,
    AskAnswer,
    AskInterrupt,
    AskRequest,
    Decided,
    Event,
    GateAnswer,
    InterruptPage,
    Interrupted,
    JSONObject,
    Option,
    Question,
    ToolRequest,
)
from .receipts import RUNS, AuditKey, KeyLike, args_digest, parse_audit_key, pinned_keys, receipt_kid, verify_decided

__version__ = "0.1.0"

DEFAULT_URL = "http://127.0.0.1:8080"
"""Where `interlock serve` listens unless told otherwise."""

DEFAULT_TIMEOUT = 30.0
"""Seconds a request may take on the network, beyond any wait it asks for."""

MAX_WAIT = 300.0
"""The longest ?wait= the API takes (5m); longer waits are made of several requests."""

STREAM_KINDS = (
    "interrupted", "resumed", "expired", "cancelled", "completed",
    "decided", "assigned", "voted", "reminded", "answered",
)
"""The kinds of event GET /v1/events streams."""

F = TypeVar("F", bound=Callable[..., Any])

Seconds = Optional[float]


def new_id(prefix: str) -> str:
    """A fresh id for a call or an ask: prefix, a dash and 26 hex digits
    (within the protocol's name rule: A-Z a-z 0-9 _ -)."""
    return f"{prefix}-{uuid.uuid4().hex[:26]}"


def go_duration(seconds: Union[float, str]) -> str:
    """seconds as a Go duration ("1500ms", "30s"); a string is taken as one."""
    if isinstance(seconds, str):
        return seconds
    ms = max(1, int(round(seconds * 1000)))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


class Client:
    """A client of Interlock's HTTP API (`interlock serve`).

    url is the API's address, INTERLOCK_URL or http://127.0.0.1:8080 by
    default; token a bearer token from `interlock people add --token`, INTERLOCK_TOKEN
    by default (an API on loopback without an auth file needs none);
    timeout the seconds a request may take on the network, beyond any wait
    for a person it asks for; agent names the agent in its tool requests
    and asks (the caller's name by default).

    audit_keys pins the audit public keys that gated calls' receipts are
    verified with: each as `interlock audit key` prints it (the 32 bytes in
    standard base64, optionally prefixed with its kid and a colon), or
    {"kid", "publicKey"}; INTERLOCK_AUDIT_KEYS (the same, separated by
    commas) by default. Without either, the keys the deployment publishes
    (GET /v1/audit/keys) are read when a receipt is first verified.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        agent: Optional[str] = None,
        audit_keys: Optional[Union[str, Iterable[KeyLike]]] = None,
    ):
        self.url = (url or os.environ.get("INTERLOCK_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("INTERLOCK_TOKEN") or None
        self.timeout = timeout
        self.agent = agent
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"Client(url={self.url!r}): give the API's address, such as {DEFAULT_URL}")
        if parts.path.strip("/") or parts.query or parts.fragment:
            raise ValueError(f"Client(url={self.url!r}): give the scheme, host and port only, such as {DEFAULT_URL}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        if audit_keys is None:
            audit_keys = os.environ.get("INTERLOCK_AUDIT_KEYS") or None
        try:
            self._pinned: Optional[List[AuditKey]] = pinned_keys(audit_keys) if audit_keys is not None else None
        except ValueError as e:
            raise ValueError(f"Client(audit_keys=...) or INTERLOCK_AUDIT_KEYS: {e}") from None
        self._published: Optional[List[AuditKey]] = None
        self._keys_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Client(url={self.url!r}, token={'***' if self.token else None})"

    # The tool-call gate.

    def request_tool(
        self,
        tool: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        call_id: Optional[str] = None,
        timeout: Seconds = None,
        agent: Optional[str] = None,
        conversation_id: Optional[str] = None,
        messages: Optional[List[Any]] = None,
        context: Optional[Mapping[str, Any]] = None,
        origin: Optional[Mapping[str, Any]] = None,
        server: Optional[str] = None,
        take: bool = True,
    ) -> Decided:
        """Ask the tool-call gate whether tool may run with args, and wait
        for the decision: allowed at once when no gate rule fires, else
        approved, edited (run it with the decision's args), rejected,
        responded or expired.

        A decision that lets the call run is returned only once its
        receipt verified with the deployment's audit keys (or those pinned)
        and states exactly this call, its args and the decision: for
        allowed, the gate's own receipt (there is nothing to take); for
        approved or edited, the approval's, whose args must be the ones
        approved, and then only once the approval was taken (POST
        /v1/gate/requests/{callId}/consume), so it is the caller's to run,
        once. Run the tool with the decision's args (allowed: the args
        requested). A receipt that does not hold raises ReceiptError; an
        approval taken already (the same call_id run before) ApprovalTaken:
        then run nothing. take=False only looks (the receipt is still
        verified): take_approval(decided) takes it later.

        timeout is how many seconds to wait for a person (None: until the
        call is decided or its rule's deadline passes). When it ends first,
        ApprovalPending is raised: ask again with the same call_id to wait
        again, the call is never asked twice."""
        body: ToolRequest = {"callId": call_id or new_id("call"), "tool": tool}
        _put(body, "server", server)
        if args is not None:
            body["args"] = dict(args)
        _put(body, "agent", agent or self.agent)
        _put(body, "conversationId", conversation_id)
        _put(body, "messages", messages)
        _put(body, "context", context)
        _put(body, "origin", origin)
        start = time.monotonic()
        pending: Optional[Interrupted] = None
        while True:
            step = _step(start, timeout)
            status, ans = self._call("POST", "/v1/gate/requests", body, {"wait": go_duration(step)}, wait=step)
            answer: GateAnswer = ans
            if status == 200 and "decided" in answer:
                decided = answer["decided"]
                self._verify(body, decided)
                if take and decided.get("decision") in ("approved", "edited"):
                    self._take(decided)
                return decided
            pending = answer.get("pending", pending)
            if _over(start, timeout):
                raise ApprovalPending(body["callId"], float(timeout or 0), pending)

    def take_approval(self, decided: Decided) -> Dict[str, Any]:
        """Take the approval of an approved or edited decision that
        request_tool(..., take=False) returned, after checking its receipt
        again: call it just before running the tool with decided["args"].
        Return the consumed event's data; raise ApprovalTaken when it was
        taken already, ReceiptError when the receipt does not hold."""
        if decided.get("decision") == "allowed":
            raise ValueError(f"call {decided.get('callId')} was allowed by the gate: it has no approval to take; run it with its args")
        if decided.get("decision") not in ("approved", "edited"):
            raise ValueError(f"call {decided.get('callId')} was {decided.get('decision')}: only an approved or edited call's approval is taken, and this call may not run")
        call = {"callId": decided["callId"], "tool": decided.get("tool", ""), "argsDigest": decided.get("argsDigest", "")}
        _put(call, "server", decided.get("server"))
        verify_decided(call, decided, self._keys_for(decided.get("receipt")))
        return self._take(decided)

    def audit_keys(self, refresh: bool = False) -> List[AuditKey]:
        """The audit keys receipts are verified with: those pinned, or the
        ones the deployment publishes (GET /v1/audit/keys), read once and
        again with refresh."""
        if self._pinned is not None:
            return self._pinned
        with self._keys_lock:
            if self._published is None or refresh:
                _, ans = self._call("GET", "/v1/audit/keys", None, None)
                keys = ans.get("keys")
                if not isinstance(keys, list):
                    raise ProtocolError(f"GET /v1/audit/keys answered without keys: is {self.url} Interlock's HTTP API, of a version with receipts?")
                good: List[AuditKey] = []
                for k in keys:
                    try:
                        good.append(parse_audit_key(k))
                    except ValueError:
                        pass  # a published key that is not one: the others verify
                self._published = good
            return self._published

    def _keys_for(self, receipt: Optional[str]) -> List[AuditKey]:
        """The keys to verify receipt with: read again when it names a key
        not among them (a worker with a new key started)."""
        try:
            keys = self.audit_keys()
            kid = receipt_kid(receipt) if receipt else None
            if self._pinned is None and kid is not None and all(k["kid"] != kid for k in keys):
                keys = self.audit_keys(refresh=True)
            return keys
        except (ProblemError, ProtocolError, Unreachable) as e:
            raise ReceiptError(
                "no_keys",
                f"cannot verify a decision's receipt: reading the deployment's audit keys failed ({e}); pin the deployment's "
                "key instead (Client(audit_keys=...) or INTERLOCK_AUDIT_KEYS, as `interlock audit key` prints it)",
            ) from e

    def _verify(self, body: ToolRequest, decided: Decided) -> None:
        """Check decided against the call requested, and the receipt of
        one that lets it run (allowed, approved, edited); raise
        ReceiptError when it does not hold."""
        call = {"callId": body["callId"], "tool": body["tool"], "argsDigest": args_digest(body.get("args"))}
        _put(call, "server", body.get("server"))
        runs = decided.get("decision") in RUNS
        verify_decided(call, decided, self._keys_for(decided.get("receipt")) if runs else [])

    def _take(self, decided: Decided) -> Dict[str, Any]:
        """Take the approval of a decision checked before, once."""
        call_id = decided["callId"]
        path = f"/v1/gate/requests/{quote(call_id, safe='')}/consume"
        try:
            _, ans = self._call("POST", path, {"argsDigest": decided.get("finalDigest", "")}, None)
        except ProblemError as e:
            if e.status == 409 and e.code == "not_waiting":
                raise ApprovalTaken(call_id, e.detail or e.code, e.problem) from None
            raise
        consumed = ans.get("consumed")
        if not isinstance(consumed, dict):
            raise ProtocolError(f"POST {path} answered without consumed: is {self.url} Interlock's HTTP API, of a version with receipts?")
        return consumed

    def require_approval(
        self,
        fn: Optional[F] = None,
        *,
        tool: Optional[str] = None,
        timeout: Seconds = None,
        agent: Optional[str] = None,
        conversation_id: Optional[str] = None,
        context: Optional[Mapping[str, Any]] = None,
        call_id: Optional[Callable[..., str]] = None,
    ) -> Any:
        """A decorator that puts every call of a tool function through the
        tool-call gate, as tool (the function's name by default) with its
        arguments, by name, as args:

            @client.require_approval
            def issue_refund(order_id: str, amount: float): ...

        allowed runs the function as called, after request_tool verified
        the gate's receipt of the call; approved runs it once with the
        decision's args, and edited with the final ones, after request_tool
        verified the decision's receipt and took its approval (ReceiptError
        or ApprovalTaken otherwise, and the function does not run); rejected
        raises ApprovalRejected (approver, reason), responded
        ApprovalResponded (message), expired ApprovalExpired: all are
        NotApproved, whose text an agent can hand to its model. timeout is as
        request_tool's. An async function stays async (the wait runs in a
        thread).

        call_id, a function of the tool's arguments, names each call (by
        default every call is a new one): a call with the id of one still
        waiting waits for that one's decision, and one decided returns that
        decision, so a call that raised ApprovalPending, or whose process
        stopped while it waited, is made again, with the same arguments,
        without asking twice. An approved id runs once: called again, it
        raises ApprovalTaken. Make the id name one action, not a kind of
        action (call_id=lambda order_id, amount: f"refund-{order_id}")."""

        def decorate(f: F) -> F:
            name = tool or f.__name__
            sig = inspect.signature(f)

            def gate(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                call_args = _args_of(name, sig, bound)
                cid = None
                if call_id is not None:
                    cid = call_id(*args, **kwargs)
                    if not isinstance(cid, str) or not cid:
                        raise TypeError(f"call_id of {name} returned {cid!r}; it must return a non-empty str naming the call, e.g. f\"refund-{{order_id}}\"")
                decided = self.request_tool(
                    name, call_args, call_id=cid, timeout=timeout, agent=agent,
                    conversation_id=conversation_id, context=context,
                )
                decision = decided["decision"]
                if decision == "allowed":
                    return args, kwargs
                if decision in ("approved", "edited"):
                    # The decision's args, checked against its receipt: never the call's own copy.
                    _rebind(name, sig, bound, decided["args"])
                    return bound.args, bound.kwargs
                raise _not_approved(name, decided)

            if inspect.iscoroutinefunction(f):
                @functools.wraps(f)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    a, k = await asyncio.to_thread(gate, args, kwargs)
                    return await f(*a, **k)

                wrapper: Any = async_wrapper
            else:
                @functools.wraps(f)
                def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                    a, k = gate(args, kwargs)
                    return f(*a, **k)

                wrapper = sync_wrapper
            wrapper.tool = name
            return wrapper  # type: ignore[no-any-return]

        if fn is not None:
            return decorate(fn)
        return decorate

    # Asks.

    def send_ask(
        self,
        interrupt: AskInterrupt,
        *,
        ask_id: Optional[str] = None,
        agent: Optional[str] = None,
        conversation_id: Optional[str] = None,
        messages: Optional[List[Any]] = None,
        context: Optional[Mapping[str, Any]] = None,
        origin: Optional[Mapping[str, Any]] = None,
        callback_url: Optional[str] = None,
        wait: Seconds = None,
    ) -> AskAnswer:
        """Put interrupt in front of people (POST /v1/asks) and return once
        it is announced, {askId, pending}, or, with wait, once it is answered
        within that many seconds, {askId, answered}. A malformed ask raises
        ProblemError invalid_payload saying what to fix. The same ask_id
        never asks twice."""
        body: AskRequest = {"askId": ask_id or new_id("ask"), "interrupt": interrupt}
        _put(body, "agent", agent or self.agent)
        _put(body, "conversationId", conversation_id)
        _put(body, "messages", messages)
        _put(body, "context", context)
        _put(body, "origin", origin)
        _put(body, "callbackUrl", callback_url)
        query = {"wait": go_duration(min(wait, MAX_WAIT))} if wait is not None else None
        _, ans = self._call("POST", "/v1/asks", body, query, wait=wait or 0)
        return ans  # type: ignore[no-any-return]

    def ask(
        self,
        interrupt: AskInterrupt,
        *,
        ask_id: Optional[str] = None,
        timeout: Seconds = None,
        agent: Optional[str] = None,
        conversation_id: Optional[str] = None,
        messages: Optional[List[Any]] = None,
        context: Optional[Mapping[str, Any]] = None,
        origin: Optional[Mapping[str, Any]] = None,
        callback_url: Optional[str] = None,
    ) -> Answered:
        """Ask people interrupt (a question, a choice or an approval, as
        docs/schema/ask-requested.json's interrupt) and wait for the answer:
        return how it was answered, or raise AskExpired or AskCancelled.

        timeout is how many seconds to wait (None: until it settles); when
        it ends first, AskPending is raised: wait_for(ask_id) later."""
        ask_id = ask_id or new_id("ask")
        start = time.monotonic()
        ans = self.send_ask(
            interrupt, ask_id=ask_id, agent=agent, conversation_id=conversation_id,
            messages=messages, context=context, origin=origin, callback_url=callback_url,
            wait=_step(start, timeout),
        )
        if "answered" in ans:
            return _settled(ans["answered"])
        return self.wait_for(ask_id, _left(start, timeout), _pending=ans.get("pending"), _waited=timeout)

    def wait_for(self, ask_id: str, timeout: Seconds = None, *, _pending: Optional[Interrupted] = None, _waited: Seconds = None) -> Answered:
        """Wait for ask ask_id to settle (GET /v1/asks/{askId}?wait=): return
        how it was answered, or raise AskExpired or AskCancelled; after
        timeout seconds (None: no end) raise AskPending."""
        start = time.monotonic()
        pending = _pending
        while True:
            step = _step(start, timeout)
            status, ans = self._call("GET", "/v1/asks/" + quote(ask_id, safe=""), None, {"wait": go_duration(step)}, wait=step)
            answer: AskAnswer = ans
            if status == 200 and "answered" in answer:
                return _settled(answer["answered"])
            pending = answer.get("pending", pending)
            if _over(start, timeout):
                raise AskPending(ask_id, float(_waited if _waited is not None else timeout or 0), pending)

    def ask_question(
        self,
        text: str,
        *,
        field: str = "answer",
        schema: Optional[JSONObject] = None,
        title: Optional[str] = None,
        **kw: Any,
    ) -> Any:
        """Ask one question and return its answer. schema is a JSON Schema
        the answer must fit (a wrong answer is refused and the question
        stays open). kw: ask_id, timeout, deadline, on_timeout, agent,
        conversation_id, messages, context, origin, callback_url."""
        q: Question = {"field": field, "question": text}
        if schema is not None:
            q["schema"] = schema
        interrupt: AskInterrupt = {"kind": "question", "questions": [q]}
        answered = self.ask(_interrupt(interrupt, title=title, kw=kw), **kw)
        return answered.get("answers", {}).get(field)

    def ask_choice(
        self,
        text: str,
        options: Union[Iterable[str], Mapping[str, str], Iterable[Option]],
        *,
        multiple: bool = False,
        title: Optional[str] = None,
        **kw: Any,
    ) -> Any:
        """Ask people to pick among options (ids, {id: label}, or
        [{"id", "label"}]) and return the id picked, or the list of ids with
        multiple=True. kw as ask_question's."""
        interrupt: AskInterrupt = {"kind": "choice", "question": text, "options": _options(options)}
        if multiple:
            interrupt["multiple"] = True
        answered = self.ask(_interrupt(interrupt, title=title, kw=kw), **kw)
        selected = answered.get("selected", [])
        return selected if multiple else (selected[0] if selected else None)

    def ask_approval(
        self,
        action: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        role: Optional[str] = None,
        title: Optional[str] = None,
        description: Optional[str] = None,
        reason: Optional[str] = None,
        args_schema: Optional[JSONObject] = None,
        decisions: Optional[List[str]] = None,
        **kw: Any,
    ) -> JSONObject:
        """Ask people holding role (or kw assignees) to approve action with
        args; return the args to run it with (edited ones when the approver
        edited them), or raise ApprovalRejected, ApprovalResponded or
        ApprovalExpired as the tool-call gate does. kw as ask_question's,
        and assignees and reminders (durations before the deadline)."""
        interrupt: AskInterrupt = {"kind": "approval", "action": action, "args": dict(args or {})}
        _put(interrupt, "approverRole", role)
        _put(interrupt, "description", description)
        _put(interrupt, "reason", reason)
        _put(interrupt, "argsSchema", args_schema)
        _put(interrupt, "decisions", decisions)
        try:
            answered = self.ask(_interrupt(interrupt, title=title, kw=kw), **kw)
        except AskExpired as e:
            raise ApprovalExpired(action, call_id=e.ask_id, answered=e.answered) from e
        verdict = answered.get("decision")
        if verdict in ("approve", "edit"):
            return answered.get("args", dict(args or {}))
        approver = answered.get("approver", "")
        if verdict == "respond":
            raise ApprovalResponded(action, approver, answered.get("message", ""), answered["askId"], answered=answered)
        raise ApprovalRejected(action, approver, answered.get("reason", ""), answered["askId"], answered=answered)

    # Reading.

    def start(
        self,
        flow: str,
        state: Optional[Mapping[str, Any]] = None,
        *,
        run: Optional[str] = None,
        origin: Optional[Mapping[str, Any]] = None,
        wait: Seconds = None,
    ) -> JSONObject:
        """Start a run of flow with state (POST /v1/runs/{flow}) and return
        what it came to: {flow, run, outcome, event} once it paused on an
        interrupt ("interrupted", the event's data saying what it asks),
        completed or failed, or {flow, run, outcome: "queued"} when no
        worker answered within wait. A refused start (a run id taken, a
        state the flow refuses) raises ProblemError with the reason."""
        body: Dict[str, Any] = {}
        _put(body, "run", run)
        _put(body, "state", state)
        _put(body, "origin", origin)
        return self._command("POST", "/v1/runs/" + quote(flow, safe=""), body, wait)

    def resume(
        self,
        flow: str,
        run: str,
        answer: Mapping[str, Any],
        *,
        idempotency_key: Optional[str] = None,
        wait: Seconds = None,
    ) -> JSONObject:
        """Answer the interrupt flow's run waits on (POST .../resume) with
        answer, a resume body: {"answers": {...}} for a question,
        {"selected": [...]} for a choice, {"decision": "approve" | "edit" |
        "reject" | "respond", ...} for an approval. The caller is who
        answers; the API never hands out resume tokens. A wrong answer
        raises ProblemError invalid_answer, and the run still waits. With
        idempotency_key, the same answer sent again is a repeat."""
        path = "/v1/runs/" + quote(flow, safe="") + "/" + quote(run, safe="") + "/resume"
        return self._command("POST", path, dict(answer), wait, idempotency_key)

    def cancel(self, flow: str, run: str, reason: Optional[str] = None, *, wait: Seconds = None) -> JSONObject:
        """Cancel flow's run (POST .../cancel), with reason for the audit."""
        body: Dict[str, Any] = {}
        _put(body, "reason", reason)
        return self._command("POST", "/v1/runs/" + quote(flow, safe="") + "/" + quote(run, safe="") + "/cancel", body, wait)

    def get_run(self, flow: str, run: str) -> JSONObject:
        """Flow's run as it stands (GET /v1/runs/{flow}/{run}): its
        checkpoint (status, node, state, interrupt, ...) and its events.
        An unknown run raises ProblemError unknown_run."""
        _, ans = self._call("GET", "/v1/runs/" + quote(flow, safe="") + "/" + quote(run, safe=""), None, None)
        return ans  # type: ignore[no-any-return]

    def _command(self, method: str, path: str, body: Any, wait: Seconds, key: Optional[str] = None) -> JSONObject:
        query = {"wait": go_duration(min(wait, MAX_WAIT))} if wait is not None else None
        headers = {"Idempotency-Key": key} if key else None
        _, ans = self._call(method, path, body, query, wait=wait or 0, headers=headers)
        return ans  # type: ignore[no-any-return]

    def list_pending(
        self,
        *,
        flow: Optional[str] = None,
        kind: Union[str, Iterable[str], None] = None,
        role: Union[str, Iterable[str], None] = None,
        order: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> InterruptPage:
        """A page of the interrupts waiting now (GET /v1/interrupts), oldest
        first (order="newest" for the newest); pass the page's next as
        cursor for the following one."""
        query: List[Tuple[str, str]] = []
        if flow:
            query.append(("flow", flow))
        query += [("kind", k) for k in _strs(kind)]
        query += [("role", r) for r in _strs(role)]
        if order:
            query.append(("order", order))
        if limit is not None:
            query.append(("limit", str(limit)))
        if cursor:
            query.append(("cursor", cursor))
        _, page = self._call("GET", "/v1/interrupts", None, query or None)
        return page  # type: ignore[no-any-return]

    def watch(
        self,
        flow: Optional[str] = None,
        run: Optional[str] = None,
        kinds: Union[str, Iterable[str], None] = None,
        *,
        last_event_id: Optional[int] = None,
        reconnect_delay: Seconds = None,
        give_up_after: float = 60.0,
    ) -> Iterator[Event]:
        """Yield the events of GET /v1/events as they come ({id, kind,
        event}: the events stream's sequence, the kind, the CloudEvent),
        of flow, of its run, of kinds (STREAM_KINDS by default).

        It starts from now, or after last_event_id. A dropped connection is
        opened again with Last-Event-ID, after reconnect_delay seconds (the
        server's retry, 2s, by default), so that no event is missed or
        repeated; after give_up_after seconds of failed reconnects
        Unreachable is raised. Stop by breaking out of the loop."""
        query: List[Tuple[str, str]] = []
        if flow:
            query.append(("flow", flow))
        if run:
            query.append(("run", run))
        query += [("kind", k) for k in _strs(kinds)]
        path = "/v1/events" + ("?" + urlencode(query) if query else "")
        last: Optional[int] = last_event_id
        delay = reconnect_delay
        failing_since: Optional[float] = None
        connected_once = False
        while True:
            headers = {"Accept": "text/event-stream"}
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            try:
                conn, resp = self._open("GET", path, None, headers, timeout=3 * 15.0 + self.timeout)
            except Unreachable:
                if not connected_once:
                    raise
                if failing_since is None:
                    failing_since = time.monotonic()
                if time.monotonic() - failing_since > give_up_after:
                    raise
                time.sleep(delay if delay is not None else 2.0)
                continue
            try:
                if resp.status != 200:
                    self._answer("GET", path, resp)  # raises the problem
                    raise ProtocolError(f"GET {path}: {resp.status} without an event stream")
                connected_once = True
                failing_since = None
                fields: Dict[str, str] = {}
                data: List[str] = []
                while True:
                    raw = resp.readline()
                    if not raw:
                        break  # the server ended the stream
                    line = raw.decode("utf-8").rstrip("\r\n")
                    if line == "":
                        if "id" in fields:
                            try:
                                last = int(fields["id"])
                            except ValueError:
                                pass
                        if data and "event" in fields and last is not None:
                            yield {"id": last, "kind": fields["event"], "event": json.loads("\n".join(data))}
                        fields, data = {}, []
                        continue
                    if line.startswith(":"):
                        continue  # a keep-alive
                    name, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if name == "data":
                        data.append(value)
                    elif name == "retry" and reconnect_delay is None:
                        try:
                            delay = int(value) / 1000.0
                        except ValueError:
                            pass
                    elif name in ("id", "event"):
                        fields[name] = value
            except (OSError, http.client.HTTPException):
                pass  # dropped: open it again
            finally:
                conn.close()
            time.sleep(delay if delay is not None else 2.0)

    # HTTP.

    def _open(self, method: str, path: str, body: Optional[bytes], headers: Dict[str, str], timeout: float) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        h = {"User-Agent": f"interlock-python/{__version__}", "Accept": "application/json"}
        h.update(headers)
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            h["Content-Type"] = "application/json"
        conn: http.client.HTTPConnection
        if self._scheme == "https":
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=h)
            return conn, conn.getresponse()
        except ConnectionRefusedError:
            conn.close()
            raise Unreachable(self.url, "connection refused") from None
        except socket.gaierror as e:
            conn.close()
            raise Unreachable(self.url, f"no such host ({e.strerror or e})") from None
        except socket.timeout:
            conn.close()
            raise Unreachable(self.url, f"no answer within {timeout:g}s") from None
        except ssl.SSLError as e:
            conn.close()
            raise Unreachable(self.url, f"TLS failed: {e}") from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise Unreachable(self.url, str(e) or type(e).__name__) from None

    def _call(self, method: str, path: str, body: Any, query: Any, wait: float = 0, headers: Optional[Dict[str, str]] = None) -> Tuple[int, Any]:
        """Send a request and return its status and JSON answer; raise the
        problem of a refusal."""
        if query:
            path += "?" + urlencode(query)
        data = None
        if body is not None:
            try:
                data = json.dumps(body, separators=(",", ":")).encode()
            except (TypeError, ValueError) as e:
                raise TypeError(f"{method} {path}: the body is not JSON: {e}; pass only str, int, float, bool, None, lists and dicts") from None
        conn, resp = self._open(method, path, data, dict(headers or {}), timeout=wait + self.timeout)
        try:
            return resp.status, self._answer(method, path, resp)
        except socket.timeout:
            raise Unreachable(self.url, f"no answer within {wait + self.timeout:g}s") from None
        except (OSError, http.client.HTTPException) as e:
            raise Unreachable(self.url, f"the connection dropped: {e}") from None
        finally:
            conn.close()

    def _answer(self, method: str, path: str, resp: http.client.HTTPResponse) -> Any:
        raw = resp.read()
        try:
            ans = json.loads(raw) if raw else None
        except ValueError:
            ans = None
        if resp.status >= 400:
            if isinstance(ans, dict) and "code" in ans:
                raise _problem_error(method, path.split("?")[0], resp.status, ans)
            raise ProtocolError(
                f"{method} {path}: {resp.status} {resp.reason} with a body that is not a problem of Interlock "
                f"({raw[:120]!r}); is {self.url} Interlock's HTTP API (`interlock serve`)?"
            )
        if not isinstance(ans, dict):
            raise ProtocolError(
                f"{method} {path}: {resp.status} with a body that is not a JSON object ({raw[:120]!r}); "
                f"is {self.url} Interlock's HTTP API (`interlock serve`)?"
            )
        return ans


# Helpers.


def _put(d: Any, key: str, value: Any) -> None:
    if value is not None:
        d[key] = dict(value) if isinstance(value, Mapping) else value


def _step(start: float, timeout: Seconds) -> float:
    """The wait of the next request: what is left of timeout, at most MAX_WAIT."""
    left = _left(start, timeout)
    if left is None:
        return MAX_WAIT
    return max(0.001, min(left, MAX_WAIT))


def _left(start: float, timeout: Seconds) -> Seconds:
    if timeout is None:
        return None
    return max(0.0, timeout - (time.monotonic() - start))


def _over(start: float, timeout: Seconds) -> bool:
    return timeout is not None and time.monotonic() - start >= timeout


def _strs(v: Union[str, Iterable[str], None]) -> List[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    return list(v)


def _settled(answered: Answered) -> Answered:
    status = answered.get("status")
    if status == "expired":
        raise AskExpired(answered)
    if status == "cancelled":
        raise AskCancelled(answered)
    return answered


_ASK_OPTIONS = ("ask_id", "timeout", "agent", "conversation_id", "messages", "context", "origin", "callback_url")


def _interrupt(interrupt: AskInterrupt, *, title: Optional[str], kw: Dict[str, Any]) -> AskInterrupt:
    """interrupt with title and the interrupt's options among kw (taken
    out of kw): deadline (seconds or a Go duration), on_timeout, assignees,
    reminders. What stays in kw are ask's options."""
    _put(interrupt, "title", title)
    deadline = kw.pop("deadline", None)
    if deadline is not None:
        interrupt["timeout"] = go_duration(deadline)
    on_timeout = kw.pop("on_timeout", None)
    if isinstance(on_timeout, str):
        on_timeout = {"action": on_timeout}
    _put(interrupt, "onTimeout", on_timeout)
    assignees, reminders = kw.pop("assignees", None), kw.pop("reminders", None)
    if interrupt.get("kind") != "approval" and (assignees is not None or reminders is not None):
        # Interlock refuses them on a question or a choice: say so here,
        # before anything is sent.
        raise TypeError(
            f"assignees and reminders are for approvals (ask_approval); a {interrupt.get('kind')} goes to whoever "
            "the deployment shows it to: leave them out"
        )
    _put(interrupt, "assignees", assignees)
    if reminders is not None:
        interrupt["reminders"] = [go_duration(r) for r in reminders]
    unknown = sorted(set(kw) - set(_ASK_OPTIONS))
    if unknown:
        raise TypeError(
            f"unknown option {', '.join(unknown)}; the ask helpers take title, deadline, on_timeout, assignees, "
            f"reminders and {', '.join(_ASK_OPTIONS)}"
        )
    return interrupt


def _options(options: Union[Iterable[str], Mapping[str, str], Iterable[Option]]) -> List[Option]:
    if isinstance(options, Mapping):
        return [{"id": str(k), "label": str(v)} for k, v in options.items()]
    out: List[Option] = []
    for o in options:
        if isinstance(o, str):
            out.append({"id": o, "label": o})
        elif isinstance(o, Mapping) and "id" in o:
            out.append({"id": str(o["id"]), "label": str(o.get("label", o["id"]))})
        else:
            raise TypeError(f"option {o!r}: give ids (strings), {{id: label}} or [{{'id': ..., 'label': ...}}]")
    return out


_SELF = ("self", "cls")


def _args_of(tool: str, sig: inspect.Signature, bound: inspect.BoundArguments) -> JSONObject:
    """A call's arguments by name, as the gate sees them: a method's self
    left out, **kwargs spread, *args as a list."""
    out: JSONObject = {}
    for i, (name, value) in enumerate(bound.arguments.items()):
        p = sig.parameters[name]
        if i == 0 and name in _SELF:
            continue
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = list(value)
        else:
            out[name] = value
    try:
        json.dumps(out)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{tool}: its arguments go to the tool-call gate as JSON, and one is not: {e}; "
            "give the function JSON values (str, int, float, bool, None, lists, dicts)"
        ) from None
    return out


def _rebind(tool: str, sig: inspect.Signature, bound: inspect.BoundArguments, final: Mapping[str, Any]) -> None:
    """Set bound's arguments to the approver's final args."""
    var_kw = next((p.name for p in sig.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    extra: Dict[str, Any] = {}
    for name, value in final.items():
        p = sig.parameters.get(name)
        if p is None or p.kind is inspect.Parameter.VAR_KEYWORD or name in _SELF:
            if var_kw is None:
                raise InterlockError(
                    f"{tool} was approved with an edit that adds the argument {name!r}, which {tool} does not take; "
                    "give the gate rule an argsSchema with additionalProperties: false so that edits keep to its arguments"
                )
            extra[name] = value
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            bound.arguments[name] = tuple(value)
        else:
            bound.arguments[name] = value
    if var_kw is not None:
        bound.arguments[var_kw] = extra


def _not_approved(tool: str, decided: Decided) -> InterlockError:
    decision = decided["decision"]
    call_id = decided.get("callId", "")
    if decision == "rejected":
        return ApprovalRejected(tool, decided.get("approver", ""), decided.get("reason", ""), call_id, decided)
    if decision == "responded":
        return ApprovalResponded(tool, decided.get("approver", ""), decided.get("message", ""), call_id, decided)
    if decision == "expired":
        return ApprovalExpired(tool, decided.get("reason", ""), call_id, decided)
    return ProtocolError(f"the gate answered {tool}'s call {call_id} with decision {decision!r}, which this client does not know; upgrade it")
