"""Kubernetes resource quantities (``100m``, ``1Gi``, ``1.5``, ``1e3``), exact and canonicalised.

Mirrors apimachinery ``resource.Quantity``: the same scanner and suffix table, values rounded up to
nano precision, BinarySI capped at 2^63-1, and the same canonical form (the API server's ``String()``):
the suffix family of the input is kept, the exponent is a multiple of 3 (or of 2^10) and as large as
possible without fractional digits. Values are held as an exact decimal ``mantissa * 10**exponent``;
floats are never used. A parsed quantity remembers the JSON value it came from so that serialising it
gives back exactly what was read.
"""

from __future__ import annotations

import enum
import functools
from decimal import Decimal
from typing import Any

from kubelet_trio.api.errors import QuantityError

__all__ = ["Quantity", "QuantityFormat"]


class QuantityFormat(enum.StrEnum):
    """The suffix family a quantity is written in (and canonicalised back to)."""

    DECIMAL_SI = "DecimalSI"  # 12M = 12 * 10^6
    BINARY_SI = "BinarySI"  # 12Mi = 12 * 2^20
    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6


_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_BY_POWER = {exp // 10: suffix for suffix, exp in _BINARY_SUFFIXES.items()} | {0: ""}
_MAX_INT64 = 2**63 - 1
_MAX_INT32 = 2**31 - 1
_NANO = -9
#: Longer digit strings are refused (upstream has no limit; Python's int/str conversion does).
MAX_DIGITS = 1000


def _scan(text: str) -> tuple[bool, str, str, str]:
    """Split ``text`` into (positive, integer digits, fraction digits, suffix) like upstream's scanner."""
    positive = True
    pos, end = 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(f"quantities must match the regular expression {_REGEX!r}: {text!r}")
    return positive, num, denom, text[suffix_start:]


_REGEX = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


def _interpret(suffix: str) -> tuple[int, int, QuantityFormat]:
    """Return (base, exponent, format) for a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], QuantityFormat.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:].lstrip("+-")
        sign_len = len(suffix) - 1 - len(digits)
        if sign_len <= 1 and digits and set(digits) <= _DIGITS:
            exponent = int(suffix[1:])
            if abs(exponent) <= _MAX_INT32:
                return 10, exponent, QuantityFormat.DECIMAL_EXPONENT
    raise QuantityError(f"unable to parse quantity's suffix: {suffix!r}")


def _strip_tens(mantissa: int, exponent: int) -> tuple[int, int]:
    if mantissa == 0:
        return 0, 0
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    return mantissa, exponent


@functools.total_ordering
class Quantity:
    """An exact Kubernetes quantity. Immutable; equality and ordering compare values (like ``Cmp``)."""

    __slots__ = ("_exponent", "_format", "_mantissa", "_negative", "raw")

    raw: str | int | float
    _negative: bool
    _mantissa: int
    _exponent: int
    _format: QuantityFormat

    def __init__(self, text: str) -> None:
        """Parse ``text`` strictly (no surrounding whitespace), as ``resource.ParseQuantity`` does."""
        if not isinstance(text, str):
            raise QuantityError(f"quantity must be a string, got {type(text).__name__}")
        self.raw = text
        self._parse(text)

    @classmethod
    def from_json(cls, value: Any) -> Quantity:
        """Decode a JSON value (string or number), keeping it for serialisation (``UnmarshalJSON``)."""
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise QuantityError(f"quantity must be a string or a number, got {type(value).__name__}")
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise QuantityError(f"quantity must be finite, got {value!r}")
            text = repr(value)
        elif isinstance(value, int):
            if abs(value) >= 10**MAX_DIGITS:
                raise QuantityError(f"quantity has more than {MAX_DIGITS} digits")
            text = str(value)
        else:
            text = value.strip(" \t\n\r\v\f")
        self = cls.__new__(cls)
        self.raw = value
        self._parse(text)
        return self

    def _parse(self, text: str) -> None:
        if not text:
            raise QuantityError("quantity must not be empty")
        positive, num, denom, suffix = _scan(text)
        if len(num) + len(denom) > MAX_DIGITS:
            raise QuantityError(f"quantity has more than {MAX_DIGITS} digits")
        base, power, fmt = _interpret(suffix)
        mantissa = int(num + denom)
        exponent = -len(denom)
        if base == 10:
            exponent += power
        else:
            mantissa <<= power
        if mantissa and exponent < _NANO:
            # Round the magnitude up to a whole number of nanos: asking for a little gets a little.
            shift = _NANO - exponent
            mantissa = 1 if shift > len(str(mantissa)) else -(-mantissa // 10**shift)
            exponent = _NANO
        if fmt is QuantityFormat.BINARY_SI:
            # The binary exponent went into the mantissa, so ``exponent`` is a (non-positive) fraction scale.
            if mantissa * 10 ** max(exponent, 0) > _MAX_INT64 * 10 ** max(-exponent, 0):
                mantissa, exponent = _MAX_INT64, 0
            if mantissa and exponent < 0 and mantissa < 10**-exponent:
                fmt = QuantityFormat.DECIMAL_SI  # 0 < |x| < 1 cannot be shown in binary units
        self._negative = not positive and mantissa != 0
        self._mantissa = mantissa
        self._exponent = exponent
        self._format = fmt

    @property
    def format(self) -> QuantityFormat:
        return self._format

    @property
    def value(self) -> Decimal:
        """The exact value."""
        digits = tuple(int(d) for d in str(self._mantissa))
        return Decimal((1 if self._negative else 0, digits, self._exponent))

    def is_zero(self) -> bool:
        return self._mantissa == 0

    def scaled_value(self, scale: int) -> int:
        """``ceil(|q| / 10**scale)`` with q's sign: upstream's ``ScaledValue`` (rounds away from zero)."""
        shift = self._exponent - scale
        magnitude_digits = len(str(self._mantissa)) + shift
        if magnitude_digits > 40:
            raise QuantityError(f"quantity {self} is too large for scale {scale}")
        magnitude: int  # typeshed types int ** int as Any (a negative exponent gives a float)
        if shift >= 0:
            magnitude = self._mantissa * 10**shift
        elif -shift > len(str(self._mantissa)):
            magnitude = 1 if self._mantissa else 0
        else:
            magnitude = -(-self._mantissa // 10**-shift)
        return -magnitude if self._negative else magnitude

    def int_value(self) -> int:
        """The value rounded up (away from zero) to an integer, like ``Value()``."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (away from zero), like ``MilliValue()``."""
        return self.scaled_value(-3)

    def canonical(self) -> str:
        """The API server's serialisation of this quantity (``Quantity.String()``)."""
        if self._mantissa == 0:
            return "0"
        sign = "-" if self._negative else ""
        fmt = self._format
        if fmt is QuantityFormat.BINARY_SI:
            if self._exponent < 0:
                whole, frac = divmod(self._mantissa, 10**-self._exponent)
            else:
                whole, frac = self._mantissa * 10**self._exponent, 0
            if whole < 1024 or frac:
                fmt = QuantityFormat.DECIMAL_SI  # small or fractional: avoid rounding and confusion
            else:
                power = 0
                while whole % 1024 == 0:
                    whole //= 1024
                    power += 1
                if power in _BINARY_BY_POWER:
                    return f"{sign}{whole}{_BINARY_BY_POWER[power]}"
                fmt = QuantityFormat.DECIMAL_EXPONENT  # beyond Ei: exact decimal instead of losing it
        mantissa, exponent = _strip_tens(self._mantissa, self._exponent)
        remainder = exponent % 3
        mantissa, exponent = mantissa * 10**remainder, exponent - remainder
        if fmt is QuantityFormat.DECIMAL_SI and exponent in _DECIMAL_BY_EXPONENT:
            return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")

    def to_json(self) -> str | int | float:
        """The JSON value this quantity was read from (or its canonical string if built in Python)."""
        return self.raw

    def _key(self) -> Decimal:
        return self.value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return (self._negative, self._mantissa and _strip_tens(self._mantissa, self._exponent)) == (
            other._negative,
            other._mantissa and _strip_tens(other._mantissa, other._exponent),
        )

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash((self._negative, self._mantissa and _strip_tens(self._mantissa, self._exponent)))

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.raw!r})"

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, "_format"):
            raise AttributeError("Quantity is immutable")
        object.__setattr__(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Quantity.from_json, (self.raw,))
