"""``grpc.health.v1`` messages, encoded by hand (protobuf wire format)::

    message HealthCheckRequest { string service = 1; }
    message HealthCheckResponse {
      enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
      ServingStatus status = 1;
    }

Two one-field messages do not justify a generated module and a protobuf runtime.
"""

from __future__ import annotations

import attrs

__all__ = [
    "NOT_SERVING",
    "SERVICE_UNKNOWN",
    "SERVING",
    "UNKNOWN",
    "HealthCheckRequest",
    "HealthCheckResponse",
    "serving_status_name",
]

UNKNOWN = 0
SERVING = 1
NOT_SERVING = 2
SERVICE_UNKNOWN = 3
_NAMES = {
    UNKNOWN: "UNKNOWN",
    SERVING: "SERVING",
    NOT_SERVING: "NOT_SERVING",
    SERVICE_UNKNOWN: "SERVICE_UNKNOWN",
}

_VARINT = 0
_I64 = 1
_LEN = 2
_I32 = 5


def serving_status_name(status: int) -> str:
    return _NAMES.get(status, str(status))


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of every field; unknown wire types are an error."""
    fields: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, pos = _read_varint(data, pos)
        elif wire == _LEN:
            length, pos = _read_varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == _I64:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == _I32:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(data):
            raise ValueError("truncated message")
        fields.append((number, wire, value))
    return fields


@attrs.frozen
class HealthCheckRequest:
    service: str = ""

    def encode(self) -> bytes:
        raw = self.service.encode()
        return (b"\x0a" + _varint(len(raw)) + raw) if raw else b""

    @classmethod
    def decode(cls, data: bytes) -> HealthCheckRequest:
        service = ""
        for number, wire, value in _fields(data):
            if number == 1 and wire == _LEN and isinstance(value, bytes):
                service = value.decode()
        return cls(service)


@attrs.frozen
class HealthCheckResponse:
    status: int = UNKNOWN

    def encode(self) -> bytes:
        return (b"\x08" + _varint(self.status)) if self.status else b""

    @classmethod
    def decode(cls, data: bytes) -> HealthCheckResponse:
        status = UNKNOWN
        for number, wire, value in _fields(data):
            if number == 1 and wire == _VARINT and isinstance(value, int):
                status = value
        return cls(status)
