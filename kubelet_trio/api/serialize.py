"""Generic attrs <-> Kubernetes JSON conversion, driven by the models' type annotations.

Every model is an ``@model`` class (frozen attrs, keyword-only, every field defaulting to ``None`` meaning
"absent"). A field's JSON name is its camelCased Python name unless ``field(json=...)`` says otherwise.
Anything the model does not know - unknown keys, and explicit ``null`` values - is kept verbatim in
``extra`` so that ``to_dict(from_dict(d)) == d`` for every well-typed input: an object can pass through the
kubelet without losing fields a newer API server added (which of those keys are unknown to the API as a
whole is :mod:`kubelet_trio.api.strict`'s question). A ``null`` *item* of a list or map is different: it
decodes to the item type's zero value (``""``, ``0``, ``false``, an empty object), as Go's JSON decoding
into a typed slice or map does - so ``command: [null]`` is ``[""]`` here as on the API server.

Supported annotations: ``str``, ``int``, ``bool``, ``int | str`` (IntOrString), :class:`Quantity`, another
model, ``tuple[X, ...]`` (a JSON list), ``dict[str, X]`` (a JSON object) and ``Any`` (kept opaque), each
``| None``.
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attr
import attrs

from kubelet_trio.api.errors import DecodeError, FieldPath, MapKey, QuantityError
from kubelet_trio.api.quantity import Quantity

__all__ = ["Model", "field", "from_json", "model", "to_json"]

_JSON_KEY = "kubelet_trio.json"
M = TypeVar("M", bound="Model")
Decoder = Callable[[Any, FieldPath], Any]
Encoder = Callable[[Any], Any]


def field(*, json: str | None = None, default: Any = None) -> Any:
    """An optional model field; ``json`` overrides the camelCase JSON name (``hostPID``, ``podIPs``)."""
    return attrs.field(default=default, metadata={_JSON_KEY: json} if json else {})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


# Tell type checkers (PEP 681) that ``@model`` makes frozen, keyword-only attrs classes, so a constructor call
# such as ``PodSpec(containers=...)`` is checked against the fields. attrs' own specifiers are listed (as
# attrs' stubs list them) so ``attrs.field(factory=..., alias=...)`` is understood; :func:`field` is
# deliberately not: a field specifier without ``default=`` would read as required, while here every field
# defaults to ``None`` - the checker sees ``= field()`` as a plain default instead.
@typing.dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(attrs.field, attr.attrib)
)
def model(cls: type[M]) -> type[M]:
    """Class decorator for API models: frozen, keyword-only attrs."""
    return attrs.frozen(kw_only=True)(cls)


@model
class Model:
    """Base of all API models. ``extra`` holds the JSON members the model does not define."""

    extra: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_dict(cls: type[M], data: Any, path: FieldPath = ()) -> M:
        """Decode a JSON object; raises :class:`DecodeError` (with the field path) on a type mismatch."""
        try:
            return _decode_model(cls, data, path)
        except RecursionError:
            raise DecodeError(path, "object is nested too deeply") from None

    def to_dict(self) -> dict[str, Any]:
        """Encode to a JSON object, reproducing unknown members and explicit nulls."""
        return _encode_model(self)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _scalar(kind: type, label: str) -> Decoder:
    def decode(value: Any, path: FieldPath) -> Any:
        if isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
            return value
        raise DecodeError(path, f"expected {label}, got {_type_name(value)}")

    return decode


def _decode_int_or_string(value: Any, path: FieldPath) -> Any:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise DecodeError(path, f"expected integer or string, got {_type_name(value)}")


def _decode_quantity(value: Any, path: FieldPath) -> Quantity:
    try:
        return Quantity.from_json(value)
    except QuantityError as err:
        raise DecodeError(path, str(err)) from None


def _decode_opaque(value: Any, path: FieldPath) -> Any:
    return copy.deepcopy(value)


def _strip_optional(tp: Any) -> Any:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
        return tuple(args)
    return tp


def _zero(tp: Any) -> Any:
    """The JSON that decodes to the zero value of ``tp`` (what Go leaves in a typed slot given ``null``)."""
    tp = _strip_optional(tp)
    if tp is str:
        return ""
    if tp is bool:
        return False
    if tp is int or isinstance(tp, tuple):  # IntOrString: Go decodes null as the integer 0
        return 0
    if tp is Quantity:
        return "0"
    origin = typing.get_origin(tp)
    if origin is tuple:
        return []
    if origin is dict or (isinstance(tp, type) and issubclass(tp, Model)):
        return {}
    return None  # Any: kept as null


def _codec(tp: Any) -> tuple[Decoder, Encoder]:
    tp = _strip_optional(tp)
    if tp is Any:
        return _decode_opaque, copy.deepcopy
    if isinstance(tp, tuple):
        if set(tp) == {int, str}:
            return _decode_int_or_string, _identity
        raise TypeError(f"unsupported union {tp}")
    if tp is str:
        return _scalar(str, "string"), _identity
    if tp is bool:
        return _scalar(bool, "boolean"), _identity
    if tp is int:
        return _scalar(int, "integer"), _identity
    if tp is Quantity:
        return _decode_quantity, Quantity.to_json
    origin = typing.get_origin(tp)
    if origin is tuple:
        item_type = typing.get_args(tp)[0]
        item_decode, item_encode = _codec(item_type)
        item_zero = _zero(item_type)

        def decode_list(value: Any, path: FieldPath) -> tuple[Any, ...]:
            if not isinstance(value, list | tuple):
                raise DecodeError(path, f"expected array, got {_type_name(value)}")
            return tuple(
                item_decode(item_zero if item is None else item, (*path, i)) for i, item in enumerate(value)
            )

        return decode_list, lambda value: [item_encode(item) for item in value]
    if origin is dict:
        value_type = typing.get_args(tp)[1]
        value_decode, value_encode = _codec(value_type)
        value_zero = _zero(value_type)

        def decode_map(value: Any, path: FieldPath) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise DecodeError(path, f"expected object, got {_type_name(value)}")
            return {
                k: value_decode(value_zero if v is None else v, (*path, MapKey(k))) for k, v in value.items()
            }

        return decode_map, lambda value: {k: value_encode(v) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, Model):
        return (lambda value, path: _decode_model(tp, value, path)), _encode_model
    raise TypeError(f"unsupported model field type {tp!r}")


def _identity(value: Any) -> Any:
    return value


@attrs.frozen
class _FieldCodec:
    attr: str
    json: str
    decode: Decoder
    encode: Encoder


_CODECS: dict[type, dict[str, _FieldCodec]] = {}


def _codecs(cls: type[Model]) -> dict[str, _FieldCodec]:
    """Per-class table JSON name -> codec, built once from the resolved annotations."""
    table = _CODECS.get(cls)
    if table is None:
        attrs.resolve_types(cls)
        table = {}
        for f in attrs.fields(cls):
            if f.name == "extra":
                continue
            json_name = f.metadata.get(_JSON_KEY) or _camel(f.name)
            decode, encode = _codec(f.type)
            table[json_name] = _FieldCodec(f.name, json_name, decode, encode)
        _CODECS[cls] = table
    return table


def _decode_model(cls: type[M], data: Any, path: FieldPath) -> M:
    if not isinstance(data, dict):
        raise DecodeError(path, f"expected object, got {_type_name(data)}")
    table = _codecs(cls)
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        codec = table.get(key)
        if codec is None or value is None:
            extra[key] = copy.deepcopy(value)
        else:
            kwargs[codec.attr] = codec.decode(value, (*path, key))
    return cls(extra=extra, **kwargs)


def _encode_model(obj: Model) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(dict(obj.extra)) if obj.extra else {}
    for codec in _codecs(type(obj)).values():
        value = getattr(obj, codec.attr)
        if value is not None:
            out[codec.json] = codec.encode(value)
    return out


def from_json(cls: type[M], data: Any, path: FieldPath = ()) -> M:
    """Functional spelling of :meth:`Model.from_dict`."""
    return cls.from_dict(data, path)


def to_json(obj: Model) -> dict[str, Any]:
    """Functional spelling of :meth:`Model.to_dict`."""
    return obj.to_dict()
