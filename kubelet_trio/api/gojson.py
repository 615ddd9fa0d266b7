"""JSON decoding as Go's ``encoding/json`` does it where Python's differs: a ``\\uD800``-``\\uDFFF`` escape
that is not half of a valid surrogate pair decodes to U+FFFD.

Python keeps such a lone surrogate in the string, and the first attempt to encode it as UTF-8 (a CRI
request, a log file, a status PATCH) raises far from the input that carried it. The API server and the Go
kubelet see U+FFFD instead, so a pod or manifest with one runs here as it does there.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["loads", "replace_surrogates"]

#: An escape that can produce a surrogate: only text containing one needs the (slower) walk.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(_SURROGATE_ESCAPE.pattern.encode())
_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: One decoder for every call: ``json.loads`` with a keyword builds a new one each time (its scanner
#: included), which cost more than decoding a small answer.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def loads(text: str | bytes) -> Any:
    """``json.loads`` with Go's rules: no ``NaN``/``Infinity``, lone surrogates replaced by U+FFFD."""
    if isinstance(text, str):
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        has_escape = _SURROGATE_ESCAPE.search(text) is not None
        data = _DECODER.decode(text)
    else:
        has_escape = _SURROGATE_ESCAPE_BYTES.search(text) is not None
        data = _DECODER.decode(text.decode(json.detect_encoding(text), "surrogatepass"))  # as json.loads
    return replace_surrogates(data) if has_escape else data


def replace_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys included) replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, list):
        return [replace_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {replace_surrogates(key): replace_surrogates(item) for key, item in value.items()}
    return value
