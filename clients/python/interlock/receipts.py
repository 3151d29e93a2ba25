"""Receipts: what the client checks before a gated tool runs.

A decision's receipt (docs/protocol.md, Receipts) is a compact JWS, EdDSA
over Ed25519, signed with the deployment's audit key. It states the call
(flow gate, run = callId, tool, server, args digest), the decision (allowed
by the gate itself, or a person's) and, for an approval, the digest of the
args to run. Args digests are the hex SHA-256 of the args'
RFC 8785 (JCS) canonical JSON.

All of it on the standard library: Ed25519 verification after RFC 8032
(section 5.1.7), and RFC 8785's canonical JSON, numbers written as
ECMAScript's Number.prototype.toString writes them.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import json
import math
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from .errors import ReceiptError

RECEIPT_TYPE = "interlock-receipt+jws"
"""The typ of a receipt's JWS header."""

RUNS = ("allowed", "approved", "edited")
"""The decisions that let a call run, each only on a receipt that holds."""

AuditKey = Dict[str, str]
"""An audit public key: {"kid", "publicKey"} (and "since"), as GET
/v1/audit/keys lists it."""

KeyLike = Union[str, Mapping[str, Any]]
"""An audit key as a caller pins it: as `interlock audit key` prints it
(the 32 bytes in standard base64, optionally prefixed with the kid and a
colon), or {"kid", "publicKey"}."""


# Ed25519 verification, RFC 8032 section 5.1.7, on the curve's extended
# coordinates (X, Y, Z, T), as the RFC's section 6 writes it.

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_Point = tuple


def _add(p: _Point, q: _Point) -> _Point:
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s: int, p: _Point) -> _Point:
    q: _Point = (0, 1, 1, 0)  # the neutral element
    while s > 0:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _same(p: _Point, q: _Point) -> bool:
    return (p[0] * q[2] - q[0] * p[2]) % _P == 0 and (p[1] * q[2] - q[1] * p[2]) % _P == 0


def _x(y: int, sign: int) -> Optional[int]:
    """The x of the point of y whose x has the low bit sign (RFC 8032 5.1.3)."""
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if x & 1 != sign:
        x = _P - x
    return x


def _point(b: bytes) -> Optional[_Point]:
    """Decodes a point (RFC 8032 5.1.3), or None when b encodes none."""
    if len(b) != 32:
        return None
    y = int.from_bytes(b, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    x = _x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % _P)


_GY = 4 * pow(5, _P - 2, _P) % _P
_B: _Point = (_x(_GY, 0), _GY, 1, _x(_GY, 0) * _GY % _P)  # type: ignore[operator]


def ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Reports whether signature is public_key's Ed25519 signature of
    message (RFC 8032 5.1.7). Step 3's group equation is checked without
    the cofactor, [S]B = R + [k]A, which the RFC allows and Go's
    crypto/ed25519 does, so that both accept the same signatures."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    a = _point(public_key)
    r = _point(signature[:32])
    s = int.from_bytes(signature[32:], "little")
    if a is None or r is None or s >= _L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public_key + message).digest(), "little") % _L
    return _same(_mul(s, _B), _add(r, _mul(k, a)))


# RFC 8785 canonical JSON.

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " ":
            out.append("\\u%04x" % ord(ch))
        elif "\ud800" <= ch <= "\udfff":
            raise ValueError(f"the string {s!r} holds a lone surrogate, which has no canonical JSON (RFC 8785)")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _number(x: Union[int, float]) -> str:
    """A number as ECMAScript's Number.prototype.toString writes the
    double nearest to it (RFC 8785 3.2.2.3)."""
    try:
        v = float(x)
    except OverflowError:
        raise ValueError(f"the number {x} is beyond a double's range, which JSON numbers are read as") from None
    if not math.isfinite(v):
        raise ValueError(f"{v} is not a JSON number")
    if v == 0:
        return "0"
    # repr gives the shortest digits that read back as v, the nearest
    # such when there are several: ECMAScript's digits.
    mantissa, _, exp = repr(abs(v)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    sign = "-" if v < 0 else ""
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    exponent = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return sign + digits + "e" + exponent
    return sign + digits[0] + "." + digits[1:] + "e" + exponent


def canonical_json(value: Any) -> str:
    """The RFC 8785 (JCS) canonical JSON of a JSON value, as the Go side
    writes it: object keys sorted by their UTF-16 code units, no space,
    numbers as JavaScript writes them, strings escaped minimally."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"the object key {key!r} is not a string; JSON keys are strings")
        keys = sorted(value, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(_string(k) + ":" + canonical_json(value[k]) for k in keys) + "}"
    raise ValueError(f"{value!r} ({type(value).__name__}) is not a JSON value: give str, int, float, bool, None, lists and dicts")


def args_digest(args: Optional[Mapping[str, Any]]) -> str:
    """The digest binding a decision to a tool call's args: the hex SHA-256
    of their RFC 8785 canonical JSON (docs/protocol.md §4). The same args
    give the same digest however they are written, in any language. None
    is the empty object."""
    value = {} if args is None else args
    if not isinstance(value, Mapping):
        raise ValueError(f"args {value!r} are not a JSON object")
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


# Audit keys and receipts.


def audit_key_id(public_key: bytes) -> str:
    """The id of an audit public key: the first 16 hex digits of the
    SHA-256 of its 32 bytes."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def parse_audit_key(key: KeyLike) -> AuditKey:
    """Reads an audit key (KeyLike), checking that it is an Ed25519 public
    key and that its kid, when given, is its id; raises ValueError saying
    how to give it otherwise."""
    kid: Optional[str] = None
    if isinstance(key, str):
        text = key.strip()
        if ":" in text:
            kid, text = text.split(":", 1)
    elif isinstance(key, Mapping) and isinstance(key.get("publicKey"), str):
        kid, text = key.get("kid"), key["publicKey"]
    else:
        raise ValueError(f"audit key {key!r} is neither a str nor {{'kid', 'publicKey'}}: give it as `interlock audit key` prints it")
    try:
        pub = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        pub = b""
    if len(pub) != 32:
        raise ValueError(f"audit key {text!r} is not an Ed25519 public key: give its 32 bytes in standard base64, as `interlock audit key` prints it")
    kid_of = audit_key_id(pub)
    if kid is not None and kid != kid_of:
        raise ValueError(f"audit key {text!r} is named {kid}, but its id is {kid_of}: give the key and its own kid")
    return {"kid": kid_of, "publicKey": text}


_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def _part(part: str) -> Optional[bytes]:
    if not _B64URL.fullmatch(part):
        return None
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return None


def _json_part(part: str) -> Any:
    raw = _part(part)
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError:
        return None


def receipt_kid(receipt: str) -> Optional[str]:
    """The kid a receipt's header names, unverified: which audit key to
    verify it with."""
    h = _json_part(receipt.strip().split(".")[0])
    return h.get("kid") if isinstance(h, dict) and isinstance(h.get("kid"), str) else None


def _time(s: Any) -> Optional[datetime.datetime]:
    if not isinstance(s, str):
        return None
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", s)
    if not m:
        return None
    frac = (m.group(2) or ".0")[1:7].ljust(6, "0")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        return datetime.datetime.fromisoformat(f"{m.group(1)}.{frac}{zone}")
    except ValueError:
        return None


def verify_receipt(receipt: str, keys: Iterable[KeyLike], now: Optional[datetime.datetime] = None) -> Dict[str, Any]:
    """Verify a receipt with the audit keys trusted (pinned, or those the
    deployment publishes at GET /v1/audit/keys) at now (default: now), and
    return what it states. Raise ReceiptError unless it is a compact JWS of
    alg EdDSA and typ interlock-receipt+jws, signed by the key its kid
    names among keys, of version 1, and not expired."""
    parts = str(receipt).strip().split(".")
    if len(parts) != 3:
        raise ReceiptError("invalid", "the receipt does not verify: it is not base64url(header).base64url(payload).base64url(signature)")
    head, body, sig = parts
    h = _json_part(head)
    if not isinstance(h, dict) or h.get("alg") != "EdDSA" or h.get("typ") != RECEIPT_TYPE or not isinstance(h.get("kid"), str):
        raise ReceiptError("invalid", f'the receipt does not verify: its header is not {{"alg":"EdDSA","kid","typ":"{RECEIPT_TYPE}"}}')
    trusted = [parse_audit_key(k) for k in keys]
    key = next((k for k in trusted if k["kid"] == h["kid"]), None)
    if key is None:
        raise ReceiptError(
            "invalid",
            f"the receipt does not verify: it is signed with key {h['kid'][:32]!r}, which is not among the audit keys "
            f"trusted ({', '.join(k['kid'] for k in trusted) or 'none'})",
        )
    signature = _part(sig) or b""
    if not ed25519_verify(base64.b64decode(key["publicKey"]), f"{head}.{body}".encode("ascii"), signature):
        raise ReceiptError("invalid", f"the receipt does not verify: its signature is not key {key['kid']}'s over its header and payload")
    r = _json_part(body)
    expires = _time(r.get("expires")) if isinstance(r, dict) else None
    if not isinstance(r, dict) or r.get("v") != 1 or type(r.get("v")) is not int or expires is None:
        raise ReceiptError("invalid", "the receipt does not verify: its payload is not a receipt of version 1")
    if (now or datetime.datetime.now(datetime.timezone.utc)) >= expires:
        raise ReceiptError("expired", f"the receipt has expired: it held until {r['expires']}; request the call again with a new call_id to ask anew")
    return r


def check_decided(receipt: Mapping[str, Any], decided: Mapping[str, Any]) -> None:
    """Check that a verified receipt states decided, the gate's decision:
    the same call (flow gate, run = callId, tool, server, args digest),
    decision and final args digest; raise ReceiptError when it does not."""
    r, d = receipt, decided

    def short(s: Any) -> str:
        return str(s or "")[:12]

    why = None
    if r.get("flow") != "gate" or r.get("run") != d.get("callId"):
        why = f"the receipt is of {r.get('flow')} {r.get('run')}, not of call {d.get('callId')}"
    elif r.get("tool", "") != d.get("tool", "") or r.get("server", "") != d.get("server", ""):
        why = f"the receipt is of a call of {r.get('tool')}, not of {d.get('tool')}"
    elif r.get("argsDigest", "") != d.get("argsDigest", ""):
        why = f"the receipt is about other args (digest {short(r.get('argsDigest'))}, the decision's {short(d.get('argsDigest'))})"
    elif r.get("decision") != d.get("decision"):
        why = f"the receipt states {r.get('decision')}, the decision {d.get('decision')}"
    elif r.get("finalDigest", "") != d.get("finalDigest", ""):
        why = f"the receipt states the args of digest {short(r.get('finalDigest'))} to run, the decision those of {short(d.get('finalDigest'))}"
    if why:
        raise ReceiptError("mismatch", why)


def verify_decided(
    call: Mapping[str, Any],
    decided: Mapping[str, Any],
    keys: Iterable[KeyLike],
    now: Optional[datetime.datetime] = None,
) -> Optional[Dict[str, Any]]:
    """Check the gate's decision on call ({"callId", "tool", "server"?,
    "argsDigest"}) before the call runs. Any decision must be about call.
    One that lets the call run must carry a receipt that verifies with keys
    and states exactly decided, about call: allowed (the gate's own; the
    call runs with its own args), or approved or edited with args whose
    digest is its finalDigest (those are the args to run). Return the
    receipt's statement (None for a decision that runs nothing); raise
    ReceiptError when a check fails, and then run nothing."""
    d = decided
    what = f"call {call['callId']} of {call['tool']}"

    def mismatch(why: str) -> ReceiptError:
        return ReceiptError("mismatch", f"the decision on {what} does not hold, so it must not run: {why}")

    if d.get("callId") != call["callId"] or d.get("tool", call["tool"]) != call["tool"] or d.get("server", "") != (call.get("server") or ""):
        raise mismatch(f"it is about call {d.get('callId')} of {d.get('tool', 'a tool it does not name')}")
    if "argsDigest" in d and d["argsDigest"] != call["argsDigest"]:
        raise mismatch(f"it is about other args (digest {str(d['argsDigest'])[:12]}, the call's {call['argsDigest'][:12]})")
    decision = d.get("decision")
    if decision not in RUNS:
        return None
    if not d.get("receipt"):
        raise ReceiptError(
            "missing",
            f"the {decision} decision on {what} carries no receipt (a worker of an earlier version decided it, or it was not "
            "Interlock's), so it cannot be verified and must not run: request the call again with a new call_id",
        )
    try:
        r = verify_receipt(d["receipt"], keys, now)
        check_decided(r, d)
    except ReceiptError as e:
        raise ReceiptError(e.reason, f"the {decision} decision on {what} must not run: {e}") from e
    if r.get("tool", "") != call["tool"] or r.get("server", "") != (call.get("server") or ""):
        raise mismatch(f"its receipt is of a call of {r.get('tool')}")
    if r.get("argsDigest") != call["argsDigest"]:
        raise mismatch(f"its receipt is about other args (digest {str(r.get('argsDigest'))[:12]}, the call's {call['argsDigest'][:12]})")
    if decision == "allowed":
        # The gate let the call run as requested, with the args whose
        # digest its receipt states; nobody approved other args.
        return r
    if not isinstance(d.get("args"), dict):
        raise mismatch("it carries no args to run")
    digest = args_digest(d["args"])
    if digest != d.get("finalDigest"):
        raise mismatch(f"its args (digest {digest[:12]}) are not the ones approved (digest {str(d.get('finalDigest'))[:12]})")
    return r


def pinned_keys(keys: Union[str, Iterable[KeyLike]]) -> List[AuditKey]:
    """Audit keys a caller pins, read: a list of KeyLike, or one str of
    them separated by commas or spaces (as INTERLOCK_AUDIT_KEYS holds
    them). An empty list is refused."""
    if isinstance(keys, str):
        keys = [k for k in re.split(r"[,\s]+", keys) if k]
    out = [parse_audit_key(k) for k in keys]
    if not out:
        raise ValueError("audit_keys is empty: pin at least one key (as `interlock audit key` prints it), or leave it out to use the keys the deployment publishes")
    return out
