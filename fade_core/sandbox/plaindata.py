"""Plain data: the only thing that crosses the sandbox boundary.

Values travel between the trusted parent and the sandboxed processes as JSON. Plain JSON loses
Python's tuple/list, set and non-string dict keys, and cannot hold inf/nan, bytes or complex, so
a small tagged form keeps them::

    1, 2.5, "s", True, None, [..]        as themselves (lists of plain values)
    tuple   {"__t": "tuple", "v": [..]}       set / frozenset   {"__t": "set" | "frozenset", "v": [..]}
    dict    {"__t": "dict", "v": [[k, v], ..]} float inf/nan     {"__t": "float", "v": "inf"}
    bytes   {"__t": "bytes", "v": "<hex>"}    complex            {"__t": "complex", "v": [re, im]}

:func:`encode` accepts exact plain types and converts subclasses of int/float/str/list/tuple/dict
to their base type without calling any method the subclass may override (so an object whose
``__eq__`` always returns True becomes an ordinary value, or is rejected). Anything else raises
:class:`Unencodable`. :func:`decode` builds only plain built-in objects.

This module uses the standard library only: it is imported inside the sandbox as well.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 200
# A plain value of depth MAX_DEPTH is at most twice as deep as JSON (tagged forms add a level), and a
# frame wraps it in a few levels more.
MAX_JSON_DEPTH = 2 * MAX_DEPTH + 16
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class Unencodable(TypeError):
    """A value that is not plain data (a custom object, a generator, a function, ...)."""


def _enc(x: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise Unencodable("value nested too deeply")
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is int:
        return x
    if t is float:
        return x if math.isfinite(x) else {"__t": "float", "v": repr(x)}
    if t is list:
        return [_enc(v, depth + 1) for v in x]
    if t is tuple:
        return {"__t": "tuple", "v": [_enc(v, depth + 1) for v in x]}
    if t is dict:
        if all(type(k) is str for k in x) and "__t" not in x:
            return {k: _enc(v, depth + 1) for k, v in x.items()}
        return {"__t": "dict", "v": [[_enc(k, depth + 1), _enc(v, depth + 1)] for k, v in x.items()]}
    if t is set or t is frozenset:
        name = "set" if t is set else "frozenset"
        return {"__t": name, "v": [_enc(v, depth + 1) for v in x]}
    if t is bytes:
        return {"__t": "bytes", "v": x.hex()}
    if t is complex:
        return {"__t": "complex", "v": [_enc(x.real, depth + 1), _enc(x.imag, depth + 1)]}
    # Subclasses: take the base value through the base type's own slots, never the subclass's methods.
    if isinstance(x, bool):
        return bool(int.__index__(x))
    if isinstance(x, int):
        return int.__index__(x)
    if isinstance(x, float):
        return _enc(float.__float__(x), depth)
    if isinstance(x, str):
        return str.__str__(x)
    if isinstance(x, (list, tuple)):
        base = list if isinstance(x, list) else tuple
        items = list.__iter__(x) if base is list else tuple.__iter__(x)
        return _enc(base(items), depth)
    if isinstance(x, dict):
        return _enc(dict(dict.items(x)), depth)
    item = getattr(type(x), "item", None)  # numpy scalars
    if t.__module__ == "numpy" and callable(item):
        return _enc(item(x), depth)
    if t.__module__ == "numpy" and hasattr(x, "tolist"):
        return _enc(x.tolist(), depth)
    raise Unencodable(f"return value of type {t.__name__} is not plain data")


def encode(x: Any) -> Any:
    """``x`` as a JSON-ready plain value (see the module docstring); raises :class:`Unencodable`."""
    return _enc(x, 0)


def _dec(x: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(x)
    if x is None or t in (bool, int, float, str):
        return x
    if t is list:
        return [_dec(v, depth + 1) for v in x]
    if t is not dict:
        raise ValueError(f"not plain data: {t.__name__}")
    tag = x.get("__t")
    if tag is None:
        return {k: _dec(v, depth + 1) for k, v in x.items()}
    v = x.get("v")
    if tag == "tuple":
        return tuple(_dec(i, depth + 1) for i in v)
    if tag == "set":
        return {_dec(i, depth + 1) for i in v}
    if tag == "frozenset":
        return frozenset(_dec(i, depth + 1) for i in v)
    if tag == "dict":
        return {_dec(k, depth + 1): _dec(val, depth + 1) for k, val in v}
    if tag == "float":
        return float(v)
    if tag == "bytes":
        return bytes.fromhex(v)
    if tag == "complex":
        return complex(float(v[0]), float(v[1]))
    raise ValueError(f"unknown plain-data tag {tag!r}")


def decode(x: Any) -> Any:
    """The Python value of an :func:`encode`-d value; builds built-in types only."""
    return _dec(x, 0)


def json_depth_exceeds(data: bytes, limit: int) -> bool:
    """True when the JSON text ``data`` nests arrays/objects more than ``limit`` deep (brackets inside
    strings do not count). Stops as soon as the limit is passed, so a deep bomb costs ``limit`` steps."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    depth = 0
    for c in brackets:
        if c == 91 or c == 123:  # [ {
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def loads_bounded(data: bytes, *, max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` for text that crossed the sandbox boundary: refuses more than ``max_bytes`` bytes
    or nesting deeper than ``max_depth`` with ValueError (never RecursionError or MemoryError)."""
    if len(data) > max_bytes:
        raise ValueError(f"frame of {len(data)} bytes exceeds the cap of {max_bytes}")
    if json_depth_exceeds(data, max_depth):
        raise ValueError(f"frame nested deeper than {max_depth}")
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("frame nested too deeply for the parser") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"frame is not UTF-8: {e}") from None


def dumps(x: Any) -> bytes:
    """Encode and serialize to UTF-8 JSON bytes."""
    return json.dumps(encode(x), separators=(",", ":")).encode()


def loads(b: bytes | str) -> Any:
    """Parse JSON bytes and decode to plain Python values."""
    return decode(json.loads(b))
