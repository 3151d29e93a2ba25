"""Interlock for Python: put a person in front of an agent's tool calls and
questions, over Interlock's HTTP API, on the standard library alone.

    from interlock import require_approval, ask_question

    @require_approval
    def issue_refund(order_id: str, amount: float): ...

    address = ask_question("Where should we ship it?", field="address")

The functions of this module use a Client made from INTERLOCK_URL
(default http://127.0.0.1:8080) and INTERLOCK_TOKEN; make a Client of your
own for another address or token.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from .client import DEFAULT_TIMEOUT, DEFAULT_URL, MAX_WAIT, STREAM_KINDS, Client, __version__, new_id
from .errors import (
    ApprovalExpired,
    ApprovalPending,
    ApprovalRejected,
    ApprovalResponded,
    ApprovalTaken,
    AskCancelled,
    AskExpired,
    AskNotAnswered,
    AskPending,
    InterlockError,
    NotApproved,
    ProblemError,
    ProtocolError,
    ReceiptError,
    StillPending,
    Unauthorized,
    Unreachable,
)
from .receipts import args_digest, canonical_json, check_decided, ed25519_verify, parse_audit_key, verify_decided, verify_receipt

_default: Optional[Client] = None
_lock = threading.Lock()


def default_client() -> Client:
    """The Client the module's functions use, made on first use from
    INTERLOCK_URL and INTERLOCK_TOKEN."""
    global _default
    with _lock:
        if _default is None:
            _default = Client()
        return _default


def require_approval(fn: Any = None, **kw: Any) -> Any:
    """Client.require_approval on the default client."""
    return default_client().require_approval(fn, **kw)


def request_tool(tool: str, args: Any = None, **kw: Any) -> Any:
    """Client.request_tool on the default client."""
    return default_client().request_tool(tool, args, **kw)


def take_approval(decided: Any) -> Any:
    """Client.take_approval on the default client."""
    return default_client().take_approval(decided)


def ask(interrupt: Any, **kw: Any) -> Any:
    """Client.ask on the default client."""
    return default_client().ask(interrupt, **kw)


def ask_question(text: str, **kw: Any) -> Any:
    """Client.ask_question on the default client."""
    return default_client().ask_question(text, **kw)


def ask_choice(text: str, options: Any, **kw: Any) -> Any:
    """Client.ask_choice on the default client."""
    return default_client().ask_choice(text, options, **kw)


def ask_approval(action: str, args: Any = None, **kw: Any) -> Any:
    """Client.ask_approval on the default client."""
    return default_client().ask_approval(action, args, **kw)


def wait_for(ask_id: str, timeout: Optional[float] = None) -> Any:
    """Client.wait_for on the default client."""
    return default_client().wait_for(ask_id, timeout)


def list_pending(**kw: Any) -> Any:
    """Client.list_pending on the default client."""
    return default_client().list_pending(**kw)


def watch(*args: Any, **kw: Any) -> Any:
    """Client.watch on the default client."""
    return default_client().watch(*args, **kw)


def start(flow: str, state: Any = None, **kw: Any) -> Any:
    """Client.start on the default client."""
    return default_client().start(flow, state, **kw)


def resume(flow: str, run: str, answer: Any, **kw: Any) -> Any:
    """Client.resume on the default client."""
    return default_client().resume(flow, run, answer, **kw)


def cancel(flow: str, run: str, reason: Optional[str] = None, **kw: Any) -> Any:
    """Client.cancel on the default client."""
    return default_client().cancel(flow, run, reason, **kw)


def get_run(flow: str, run: str) -> Any:
    """Client.get_run on the default client."""
    return default_client().get_run(flow, run)


__all__ = [
    "ApprovalExpired", "ApprovalPending", "ApprovalRejected", "ApprovalResponded",
    "ApprovalTaken", "AskCancelled", "AskExpired", "AskNotAnswered", "AskPending", "Client",
    "DEFAULT_TIMEOUT", "DEFAULT_URL", "InterlockError", "MAX_WAIT", "NotApproved",
    "ProblemError", "ProtocolError", "ReceiptError", "STREAM_KINDS", "StillPending",
    "Unauthorized", "Unreachable", "__version__", "args_digest", "ask", "ask_approval",
    "ask_choice", "ask_question", "canonical_json", "cancel", "check_decided",
    "default_client", "ed25519_verify", "get_run", "list_pending", "new_id",
    "parse_audit_key", "request_tool", "require_approval", "resume", "start",
    "take_approval", "verify_decided", "verify_receipt", "wait_for", "watch",
]
