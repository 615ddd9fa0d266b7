"""The container hash stamped on every container (Go: ``kubecontainer.HashContainer``, ≥ 1.31).

Only ``name`` and ``image`` are hashed, so in practice only an image change restarts a running container.
The Go code hashes ``spew``'s ``%#v`` rendering of the JSON bytes (``hashutil.DeepHashObject`` over the
``[]byte`` from ``json.Marshal``), with FNV-32a; this reproduces it bit for bit so hashes written by either
kubelet agree (upstream's test vector: ``test_container`` + ``foo/image:v1`` → ``8e45cbd0``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubelet_trio.api import Container

__all__ = ["fnv32a", "go_json_string", "hash_container"]

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def fnv32a(data: bytes) -> int:
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def go_json_string(text: str) -> str:
    """A string literal as Go's ``encoding/json`` writes it (HTML-safe: ``<``, ``>``, ``&`` escaped)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or ch in "<>&" or code in (0x2028, 0x2029):
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate is invalid UTF-8: Go writes U+FFFD
            out.append("\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def hash_container(container: Container) -> str:
    """Lowercase hex, no padding (``strconv.FormatUint(hash, 16)``), as in the hash annotation."""
    return _hash_name_image(container.name or "", container.image or "")


@functools.lru_cache(maxsize=4096)
def _hash_name_image(name: str, image: str) -> str:
    """Memoized: every sync of every pod hashes each container a few times, and a node runs few images."""
    # json.Marshal(map[string]string) sorts keys: "image" < "name".
    doc = f'{{"image":{go_json_string(image)},"name":{go_json_string(name)}}}'
    raw = doc.encode("utf-8")
    spew = "([]uint8)[" + " ".join(str(b) for b in raw) + "]"
    return format(fnv32a(spew.encode("ascii")), "x")
