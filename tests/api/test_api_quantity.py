"""Quantity parsing and canonical form, checked against upstream's ``quantity_test.go`` tables."""

from __future__ import annotations

from decimal import Decimal, localcontext

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubelet_trio.api import Quantity, QuantityError, QuantityFormat

# (input, canonical) - from TestQuantityParse/TestQuantityString/TestQuantityParseEmit upstream.
CANONICAL = [
    ("0", "0"),
    ("0n", "0"),
    ("0Ki", "0"),
    ("100m", "100m"),
    ("1Gi", "1Gi"),
    ("1.5", "1500m"),
    ("1e3", "1e3"),
    ("0.1Ki", "102400m"),
    ("+1", "1"),
    (".5", "500m"),
    ("1E", "1E"),
    ("1Ei", "1Ei"),
    ("1000m", "1"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    ("8Ki", "8Ki"),
    ("300Mi", "300Mi"),
    ("307200Ki", "300Mi"),
    ("1001Gi", "1001Gi"),
    ("1025024Mi", "1001Gi"),
    ("1024Gi", "1Ti"),
    ("5000m", "5"),
    ("0.5", "500m"),
    ("0.001T", "1G"),
    ("1000u", "1m"),
    ("1.08", "1080m"),
    ("1080000000n", "1080m"),
    ("50k", "50k"),
    ("40T", "40T"),
    ("1.01E", "1010P"),
    ("12E", "12E"),
    ("1000E", "1e21"),
    ("5000E", "5e21"),
    ("1000000E", "1e24"),
    ("1e9", "1e9"),
    (".001e12", "1e9"),
    ("0.001e0", "1e-3"),
    ("1000e-12", "1e-9"),
    ("80e-3", "80e-3"),
    ("1.2e3", "1200"),
    ("1.3E+6", "1300e3"),
    ("00", "0"),
    ("1.", "1"),
    ("1.G", "1G"),
    (".0001k", "100m"),
    ("-1.5Gi", "-1536Mi"),
    ("-100m", "-100m"),
    ("1025", "1025"),
    # rounding up to nano precision
    ("3.001n", "4n"),
    ("1.1E-9", "2e-9"),
    ("0.0000000001", "1n"),
    ("0.00000012345", "124n"),
    ("-0.0000000001", "-1n"),
    # binary: below 1024 or fractional is shown in decimal; capped at 2^63-1
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
    ("0.5Mi", "512Ki"),
    ("100.035Ki", "102435840m"),
    ("9Ei", "9223372036854775807"),
    ("9223372036854775807Ki", "9223372036854775807"),
    ("1e2147483647", "10e2147483646"),
]

INVALID = [
    "",
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    "1e4294967297",
    "E2147483648",
    " 1",
    "1 ",
    "1e",
    "1Ki2",
    "1ki",
    "1m3",
    "\uff11",  # a non-ASCII digit (fullwidth one)
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL)
def test_canonical_form(text: str, canonical: str) -> None:
    q = Quantity(text)
    assert q.canonical() == canonical
    assert str(q) == canonical
    assert q.to_json() == text  # the original is what gets serialised
    again = Quantity(canonical)
    assert again == q
    assert again.canonical() == canonical


@pytest.mark.parametrize("text", INVALID)
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        Quantity(text)


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("1", QuantityFormat.DECIMAL_SI),
        ("1Ki", QuantityFormat.BINARY_SI),
        ("1e3", QuantityFormat.DECIMAL_EXPONENT),
        ("1E-3", QuantityFormat.DECIMAL_EXPONENT),
        ("1E", QuantityFormat.DECIMAL_SI),
        ("0.000000000001Ki", QuantityFormat.DECIMAL_SI),
    ],
)
def test_format_family(text: str, fmt: QuantityFormat) -> None:
    assert Quantity(text).format is fmt


def test_exact_values() -> None:
    assert Quantity("100m").value == Decimal("0.1")
    assert Quantity("1Gi").value == 2**30
    assert Quantity("0.1Ki").value == Decimal("102.4")
    assert Quantity("1e3").value == 1000
    assert Quantity("1Ei").value == 2**60
    assert Quantity("1E").value == 10**18
    assert Quantity("1.5").milli_value() == 1500
    assert Quantity("100m").milli_value() == 100
    assert Quantity("1n").milli_value() == 1  # rounded up, away from zero
    assert Quantity("-9.01").int_value() == -10
    assert Quantity("2Gi").int_value() == 2 * 2**30


def test_comparisons() -> None:
    assert Quantity("1Ki") == Quantity("1024")
    assert Quantity("1000m") == Quantity("1")
    assert hash(Quantity("1000m")) == hash(Quantity("1"))
    assert Quantity("100m") > Quantity("50m")
    assert Quantity("10000T") > Quantity("100Gi")
    assert Quantity("-1") < Quantity("0") < Quantity("1n")
    assert sorted([Quantity("1Gi"), Quantity("1G"), Quantity("1Mi")]) == [
        Quantity("1Mi"),
        Quantity("1G"),
        Quantity("1Gi"),
    ]


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [(1, "1"), (0.5, "500m"), (1048576, "1048576"), (" 100m ", "100m"), (1e-7, "100e-9"), (2.0, "2")],
)
def test_from_json_numbers_and_whitespace(raw: object, canonical: str) -> None:
    q = Quantity.from_json(raw)
    assert q.canonical() == canonical
    assert q.to_json() == raw


@pytest.mark.parametrize("raw", [True, None, [], {}, float("nan"), float("inf"), "", "  "])
def test_from_json_rejects(raw: object) -> None:
    with pytest.raises(QuantityError):
        Quantity.from_json(raw)


def test_immutable() -> None:
    q = Quantity("1")
    with pytest.raises(AttributeError):
        q.raw = "2"  # type: ignore[misc]


_QUANTITY_CHARS = st.sampled_from(list("0123456789.+-eEinumkKMGTP "))


@given(st.text(_QUANTITY_CHARS, max_size=24) | st.text(max_size=24))
def test_fuzz_parse_only_raises_quantity_error(text: str) -> None:
    try:
        q = Quantity(text)
    except QuantityError:
        return
    canonical = q.canonical()
    assert Quantity(canonical) == q
    assert Quantity(canonical).canonical() == canonical


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "E-2"]


@given(
    st.sampled_from(["", "+", "-"]),
    st.integers(min_value=0, max_value=10**20),
    st.one_of(st.none(), st.text(st.sampled_from("0123456789"), max_size=12)),
    st.sampled_from(_SUFFIXES),
)
def test_fuzz_well_formed_quantities_are_exact(sign: str, whole: int, frac: str | None, suffix: str) -> None:
    text = f"{sign}{whole}" + (f".{frac}" if frac is not None else "") + suffix
    q = Quantity(text)
    with localcontext(prec=100):
        _check_exact(q, sign, whole, frac, suffix)


def _check_exact(q: Quantity, sign: str, whole: int, frac: str | None, suffix: str) -> None:
    expected = Decimal(f"{'-' if sign == '-' else ''}{whole}.{frac or '0'}")
    if suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        expected *= 2 ** (10 * ("KMGTPE".index(suffix[0]) + 1))
    elif suffix.startswith(("e", "E-")):
        expected = expected.scaleb(int(suffix[1:]))
    elif suffix:
        expected = expected.scaleb(
            {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}[suffix]
        )
    magnitude = abs(expected)
    if q.format is QuantityFormat.BINARY_SI and magnitude > 2**63 - 1:
        assert abs(q.value) == 2**63 - 1
    elif magnitude and magnitude.as_tuple().exponent < -9 and magnitude % Decimal("1e-9"):
        assert abs(q.value) > magnitude and abs(q.value) - magnitude < Decimal("1e-9")
    else:
        assert abs(q.value) == magnitude
    assert Quantity(q.canonical()) == q
