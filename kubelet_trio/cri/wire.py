"""The protobuf wire format of CRI messages: answers decoded into the betterproto2 message classes, and
requests encoded from them.

betterproto2 parses through a byte stream one byte at a time and builds a record per field, which made
decoding the largest CPU cost of a relist or a pod inspection (thirty listed containers with their
labels and annotations took about 6 ms). :func:`decode` walks the bytes by index instead, with the
classes' own field metadata; the common field kinds are converted here, and every other kind by the
library's own conversion, so the messages are equal to what ``Message.parse`` returns (the tests compare
the two on every CRI message type). :class:`CriCodec` hands it to grpclib; an answer that does not decode
is a :class:`MalformedAnswer`, whatever went wrong inside, so the caller can treat it as a failed call.
:func:`encode` writes with the same field plan the bytes ``bytes(message)`` writes, five times faster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

import betterproto2
from grpclib.encoding.proto import ProtoCodec

__all__ = ["CriCodec", "ItemMemo", "MalformedAnswer", "decode", "encode", "generation"]

M = TypeVar("M", bound=betterproto2.Message)

_VARINT: Final = 0
_FIXED64: Final = 1
_LEN: Final = 2
_FIXED32: Final = 5

# How a field's value is stored: converted from a varint, taken as text or bytes, decoded as a message,
# added to a map, or handed to the library's conversion (fixed-width numbers, wrapped types).
_INT32, _INT64, _UINT32, _UINT64, _SINT, _BOOL, _ENUM = range(7)
_STRING, _BYTES, _MESSAGE, _MAP, _STRING_MAP, _LIBRARY = range(7, 13)

_VARINT_KINDS = {
    betterproto2.TYPE_INT32: _INT32,
    betterproto2.TYPE_INT64: _INT64,
    betterproto2.TYPE_UINT32: _UINT32,
    betterproto2.TYPE_UINT64: _UINT64,
    betterproto2.TYPE_SINT32: _SINT,
    betterproto2.TYPE_SINT64: _SINT,
    betterproto2.TYPE_BOOL: _BOOL,
    betterproto2.TYPE_ENUM: _ENUM,
}


_TYPES_ON_WIRE = {
    _VARINT: betterproto2.WIRE_VARINT_TYPES,
    _FIXED32: betterproto2.WIRE_FIXED_32_TYPES,
    _FIXED64: betterproto2.WIRE_FIXED_64_TYPES,
    _LEN: betterproto2.WIRE_LEN_DELIM_TYPES,
}


class _Field:
    __slots__ = ("cls", "kind", "meta", "name", "repeated", "wire")

    def __init__(self, name: str, meta: Any, kind: int, wire: int, cls: Any, repeated: bool) -> None:
        self.name = name
        self.meta = meta
        self.kind = kind
        self.wire = wire  # the wire type this kind is read from (any other goes to the library)
        self.cls = cls  # enum, message or map-entry class
        self.repeated = repeated


_plans: dict[type, dict[int, _Field] | None] = {}


def _plan(cls: type[betterproto2.Message]) -> dict[int, _Field] | None:
    """Per field number, how to read it (None: a pydantic class, left to the library)."""
    try:
        return _plans[cls]
    except KeyError:
        pass
    plan: dict[int, _Field] | None = None
    if not cls()._is_pydantic():
        proto = betterproto2.ProtoClassMetadata(cls)  # what the library caches as ``cls._betterproto``
        plan = {}
        for number, name in proto.field_name_by_number.items():
            meta = proto.meta_by_field_name[name]
            field_cls = proto.cls_by_field.get(name)
            kind, wire = _LIBRARY, -1
            proto_type = meta.proto_type
            if proto_type in _VARINT_KINDS:
                kind, wire = _VARINT_KINDS[proto_type], _VARINT
            elif proto_type == betterproto2.TYPE_STRING:
                kind, wire = _STRING, _LEN
            elif proto_type == betterproto2.TYPE_BYTES:
                kind, wire = _BYTES, _LEN
            elif proto_type == betterproto2.TYPE_MESSAGE and not meta.unwrap:
                kind, wire = _MESSAGE, _LEN
            elif proto_type == betterproto2.TYPE_MAP:
                assert meta.map_meta is not None
                key, value = meta.map_meta
                plain = key.proto_type == value.proto_type == betterproto2.TYPE_STRING and not value.unwrap
                kind, wire = (_STRING_MAP if plain else _MAP), _LEN
            plan[number] = _Field(name, meta, kind, wire, field_cls, bool(meta.repeated))
    _plans[cls] = plan
    return plan


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7
        if shift >= 64:
            raise ValueError("Too many bytes when decoding varint.")


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    sign = 1 << (bits - 1)
    return (value ^ sign) - sign


_VARINT_CONVERSIONS: dict[int, Callable[[int], Any]] = {
    _INT32: lambda v: _signed(v, 32),
    _INT64: lambda v: _signed(v, 64),
    _UINT32: lambda v: v & 0xFFFFFFFF,
    _UINT64: lambda v: v & 0xFFFFFFFFFFFFFFFF,
    _SINT: lambda v: (v >> 1) ^ -(v & 1),
    _BOOL: lambda v: v > 0,
}


def _string_entry(data: bytes) -> tuple[str, str]:
    """A ``map<string, string>`` entry: key (field 1) and value (field 2), either possibly absent."""
    key = value = ""
    pos, end = 0, len(data)
    while pos < end:
        tag, pos = _varint(data, pos)
        if tag & 7 != _LEN:
            raise ValueError(f"map entry field {tag >> 3}: wire type {tag & 7}, expected 2")
        length, pos = _varint(data, pos)
        text = str(data[pos : pos + length], "utf-8")
        pos += length
        if tag >> 3 == 1:
            key = text
        elif tag >> 3 == 2:
            value = text
    if pos != end:
        raise ValueError("map entry ended inside a field")
    return key, value


MIN_GENERATION: Final = 32


def generation(items: int) -> int:
    """How many items a generation of an :class:`ItemMemo` holds before it turns, for answers of ``items``."""
    return max(MIN_GENERATION, items + items // 4)


class ItemMemo:
    """The items of a list answer's repeated message field, decoded, by their bytes: a relist of a runtime
    whose containers did not change decodes none of them again (a relist of 160 containers took 11 ms of
    CPU every second). What a call returns is shared with later calls: read it, do not change it.

    Two generations: an item found in the older one moves to the current one, and after an answer the
    current one becomes the older once it holds a quarter more items than the longest answer since the
    last turn (at least :data:`MIN_GENERATION`). So the memo holds what the last answers hold, and a
    generation at most that limit plus one answer.
    """

    __slots__ = ("_current", "_longest", "_previous")

    def __init__(self) -> None:
        self._current: dict[bytes, Any] = {}
        self._previous: dict[bytes, Any] = {}
        self._longest = 0  # the longest answer of the current generation

    def item(self, cls: type[M], raw: bytes) -> M:
        item = self._current.get(raw)
        if item is None:
            item = self._previous.pop(raw, None)
            if item is None:
                item = decode(cls, raw)
            self._current[raw] = item
        return item

    def answered(self, items: int) -> None:
        """An answer of ``items`` items was decoded (never turned inside one: all its items stay)."""
        self._longest = max(self._longest, items)
        if len(self._current) >= generation(self._longest):
            self._previous, self._current, self._longest = self._current, {}, 0


def decode(cls: type[M], data: bytes, memo: ItemMemo | None = None) -> M:
    """The message of class ``cls`` encoded in ``data`` (equal to ``cls.parse(data)``); with ``memo``, the
    items of its repeated message fields come from there."""
    plan = _plan(cls)
    if plan is None:
        return cls.parse(data)
    message = cls()
    unknown = b""
    pos, end = 0, len(data)
    try:
        while pos < end:
            start = pos
            tag, pos = _varint(data, pos)
            wire = tag & 7
            value: Any
            if wire == _VARINT:
                value, pos = _varint(data, pos)
            elif wire == _LEN:
                length, pos = _varint(data, pos)
                value = data[pos : pos + length]
                pos += length
            elif wire == _FIXED64:
                value = data[pos : pos + 8]
                pos += 8
            elif wire == _FIXED32:
                value = data[pos : pos + 4]
                pos += 4
            else:
                raise ValueError(f"unsupported wire type {wire}")
            if pos > end:
                raise ValueError("the message ended inside a field")
            field = plan.get(tag >> 3)
            if field is None:
                unknown += data[start:pos]
                continue
            kind = field.kind
            if wire != field.wire:
                _library(message, field, wire, value)
                continue
            if kind == _STRING:
                value = str(value, "utf-8")
            elif kind == _MESSAGE:
                if memo is not None and field.repeated:
                    value = memo.item(field.cls, bytes(value))
                else:
                    value = decode(field.cls, value)
            elif kind == _STRING_MAP:
                key, text = _string_entry(value)
                getattr(message, field.name)[key] = text
                continue
            elif kind == _MAP:
                entry = decode(field.cls, value)
                getattr(message, field.name)[entry.key] = entry.value
                continue
            elif kind == _ENUM:
                value = field.cls(_signed(value, 64))
            elif kind != _BYTES:
                value = _VARINT_CONVERSIONS[kind](value)
            if field.repeated:
                getattr(message, field.name).append(value)
            else:
                setattr(message, field.name, value)
    except IndexError as err:
        raise ValueError("the message ended inside a field") from err
    if unknown:
        message._unknown_fields = unknown
    if memo is not None:
        memo.answered(max((len(getattr(message, f.name)) for f in plan.values() if f.repeated), default=0))
    return message


def _library(message: betterproto2.Message, field: _Field, wire: int, value: Any) -> None:
    """A field on a wire type other than its usual one (a packed repeated number, say): the library's
    conversions, element by element as its parser does."""
    meta = field.meta
    if wire == _LEN and meta.proto_type in betterproto2.PACKED_TYPES:
        values = []
        pos = 0
        while pos < len(value):
            if meta.proto_type in betterproto2.WIRE_FIXED_32_TYPES:
                item, item_wire, pos = value[pos : pos + 4], _FIXED32, pos + 4
            elif meta.proto_type in betterproto2.WIRE_FIXED_64_TYPES:
                item, item_wire, pos = value[pos : pos + 8], _FIXED64, pos + 8
            else:
                (item, pos), item_wire = _varint(value, pos), _VARINT
            values.append(message._postprocess_single(item_wire, meta, field.name, item))
        if field.repeated:
            getattr(message, field.name).extend(values)
        else:
            setattr(message, field.name, values)
        return
    if meta.proto_type not in _TYPES_ON_WIRE.get(wire, ()):
        raise ValueError(f"field {meta.number} ({meta.proto_type}) on wire type {wire}")
    converted = message._postprocess_single(wire, meta, field.name, value)
    if meta.proto_type == betterproto2.TYPE_MAP:
        getattr(message, field.name)[converted.key] = converted.value
    elif field.repeated:
        getattr(message, field.name).append(converted)
    else:
        setattr(message, field.name, converted)


# -- encoding -------------------------------------------------------------------------------------------


def _encode_varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return bytes((value,))
    if value < 0:
        value += 1 << 64  # two's complement, ten bytes, as protobuf encodes negative numbers
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag(value: int) -> int:
    return value << 1 if value >= 0 else (value << 1) ^ ~0


class _Out:
    """How one field is written: its key, its default, and the plan's reading of it."""

    __slots__ = ("default", "field", "key", "packed")

    def __init__(self, field: _Field, default: Any) -> None:
        self.field = field
        self.default = default
        wire = _LEN if field.repeated or field.kind > _ENUM else _VARINT
        self.key = _encode_varint(field.meta.number << 3 | wire)
        self.packed = field.repeated and field.kind <= _ENUM


_out_plans: dict[type, list[_Out] | None] = {}


def _out_plan(cls: type[betterproto2.Message]) -> list[_Out] | None:
    """The fields in the order the library writes them (None: left to the library)."""
    try:
        return _out_plans[cls]
    except KeyError:
        pass
    plan = _plan(cls)
    out: list[_Out] | None = None
    if plan is not None:
        by_name = {field.name: field for field in plan.values()}
        blank = cls()
        out = [
            _Out(by_name[name], blank._get_field_default(name))
            for name in betterproto2.ProtoClassMetadata(cls).meta_by_field_name
        ]
    _out_plans[cls] = out
    return out


def _scalar_bytes(kind: int, value: Any) -> bytes:
    if kind == _SINT:
        return _encode_varint(_zigzag(value))
    return _encode_varint(int(value))


def encode(message: betterproto2.Message) -> bytes:
    """``bytes(message)``, by the plan :func:`decode` reads with: betterproto2's own encoder tests every
    field against its default through generic code, which made a small request cost as much to encode as
    a large answer to decode."""
    plan = _out_plan(type(message))
    if plan is None:
        return bytes(message)
    out = bytearray()
    for entry in plan:
        field = entry.field
        value = getattr(message, field.name)
        if value is None or value == entry.default:
            continue  # unset, or the default (zero) value, which protobuf does not write
        kind = field.kind
        if kind in (_LIBRARY, _MAP):
            out += _library_bytes(field.meta, value)
        elif entry.packed:
            body = b"".join([_scalar_bytes(kind, item) for item in value])
            out += entry.key + _encode_varint(len(body)) + body
        elif kind == _STRING_MAP:
            for key, text in value.items():
                key_bytes, text_bytes = key.encode(), text.encode()
                item = b"\n" + _encode_varint(len(key_bytes)) + key_bytes
                item += b"\x12" + _encode_varint(len(text_bytes)) + text_bytes
                out += entry.key + _encode_varint(len(item)) + item
        elif kind <= _ENUM:
            out += entry.key + _scalar_bytes(kind, value)
        else:
            for item in value if field.repeated else (value,):
                if kind == _STRING:
                    data = item.encode()
                elif kind == _MESSAGE:
                    data = encode(item)
                else:
                    data = item
                out += entry.key + _encode_varint(len(data)) + data
    out += message._unknown_fields
    return bytes(out)


def _library_bytes(meta: Any, value: Any) -> bytes:
    """A field of a kind the plan leaves to betterproto2 (fixed-width numbers, wrapped types, maps of
    other types), written as its encoder writes it."""
    serialize = betterproto2._serialize_single
    if meta.repeated:
        if meta.proto_type in betterproto2.PACKED_TYPES:
            body = b"".join(betterproto2._preprocess_single(meta.proto_type, None, item) for item in value)
            return serialize(meta.number, betterproto2.TYPE_BYTES, body)
        return b"".join(serialize(meta.number, meta.proto_type, item, unwrap=meta.unwrap) for item in value)
    if meta.map_meta:
        key_meta, value_meta = meta.map_meta
        return b"".join(
            serialize(
                meta.number,
                meta.proto_type,
                serialize(1, key_meta.proto_type, key)
                + serialize(2, value_meta.proto_type, item, unwrap=value_meta.unwrap),
            )
            for key, item in value.items()
        )
    return serialize(meta.number, meta.proto_type, value, unwrap=meta.unwrap)


class MalformedAnswer(ValueError):
    """The runtime's answer is not a valid encoding of the expected message."""


class CriCodec(ProtoCodec):
    """grpclib's protobuf codec with :func:`decode` for the answers; raises :class:`MalformedAnswer` for
    bytes that do not decode (a wrong type, a truncation, nesting deeper than Python's stack, ...)."""

    def decode(self, data: bytes, message_type: Any, memo: ItemMemo | None = None) -> Any:
        try:
            if isinstance(message_type, type) and issubclass(message_type, betterproto2.Message):
                return decode(message_type, data, memo)
            return super().decode(data, message_type)
        except Exception as err:
            name = getattr(message_type, "__name__", str(message_type))
            raise MalformedAnswer(f"cannot decode {name}: {type(err).__name__}: {err}") from err
