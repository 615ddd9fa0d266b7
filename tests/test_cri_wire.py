"""The CRI's wire decoder gives exactly the messages betterproto2's own parser gives, and its encoder the
bytes betterproto2's own encoder gives."""

from __future__ import annotations

import random
from typing import Any

import betterproto2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.wire import CriCodec, ItemMemo, MalformedAnswer, decode, encode, generation

# some CRI fields are deprecated: setting them at random warns
pytestmark = pytest.mark.filterwarnings("ignore:.* is deprecated:DeprecationWarning")

MESSAGES = sorted(
    (
        cls
        for cls in vars(pb).values()
        if isinstance(cls, type) and issubclass(cls, betterproto2.Message) and cls is not betterproto2.Message
    ),
    key=lambda cls: cls.__name__,
)

_INTS = {
    betterproto2.TYPE_INT32: (-(2**31), 2**31 - 1),
    betterproto2.TYPE_INT64: (-(2**63), 2**63 - 1),
    betterproto2.TYPE_UINT32: (0, 2**32 - 1),
    betterproto2.TYPE_UINT64: (0, 2**64 - 1),
    betterproto2.TYPE_SINT32: (-(2**31), 2**31 - 1),
    betterproto2.TYPE_SINT64: (-(2**63), 2**63 - 1),
}


def _text(rng: random.Random) -> str:
    return "".join(rng.choice("ab-/:é☃0") for _ in range(rng.choice((0, 1, 5, 40))))


def _scalar(proto_type: str, cls: Any, rng: random.Random, depth: int) -> Any:
    if proto_type in _INTS:
        low, high = _INTS[proto_type]
        return rng.choice((0, 1, -1 if low < 0 else 2, low, high, rng.randint(low, high)))
    if proto_type == betterproto2.TYPE_BOOL:
        return rng.random() < 0.5
    if proto_type == betterproto2.TYPE_STRING:
        return _text(rng)
    if proto_type == betterproto2.TYPE_BYTES:
        return rng.randbytes(rng.choice((0, 3, 200)))
    if proto_type == betterproto2.TYPE_ENUM:
        return rng.choice(list(cls))
    assert proto_type == betterproto2.TYPE_MESSAGE, proto_type
    return _instance(cls, rng, depth + 1)


def _instance(cls: type[betterproto2.Message], rng: random.Random, depth: int = 0) -> Any:
    """A message of ``cls`` with a random subset of its fields set to random values."""
    proto = cls._betterproto
    values: dict[str, Any] = {}
    for name, meta in proto.meta_by_field_name.items():
        if rng.random() < 0.3 or (depth > 3 and meta.proto_type == betterproto2.TYPE_MESSAGE):
            continue
        field_cls = proto.cls_by_field.get(name)
        if meta.proto_type == betterproto2.TYPE_MAP:
            assert meta.map_meta is not None
            key_type, value_type = (m.proto_type for m in meta.map_meta)
            value_cls = proto.cls_by_field.get(f"{name}.value")
            values[name] = {
                _scalar(key_type, None, rng, depth): _scalar(value_type, value_cls, rng, depth)
                for _ in range(rng.choice((0, 1, 6)))
            }
        elif meta.repeated:
            values[name] = [
                _scalar(meta.proto_type, field_cls, rng, depth) for _ in range(rng.choice((0, 1, 3)))
            ]
        else:
            values[name] = _scalar(meta.proto_type, field_cls, rng, depth)
    return cls(**values)


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda cls: cls.__name__)
def test_every_cri_message_decodes_as_the_library_parses_it(cls: type[betterproto2.Message]) -> None:
    rng = random.Random(cls.__name__)
    for _ in range(25):
        data = bytes(_instance(cls, rng))
        expected = cls.parse(data)
        got = decode(cls, data)
        assert got == expected
        assert bytes(got) == data


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda cls: cls.__name__)
def test_every_cri_message_encodes_as_the_library_does(cls: type[betterproto2.Message]) -> None:
    rng = random.Random("encode " + cls.__name__)
    for _ in range(25):
        message = _instance(cls, rng)
        assert encode(message) == bytes(message)


def test_encoding_keeps_unknown_fields_and_writes_empty_messages() -> None:
    message = decode(pb.ContainerFilter, bytes(pb.ContainerFilter(id="c")) + b"\xa0\x06\x01")
    assert encode(message) == bytes(message) == b"\n\x01c\xa0\x06\x01"
    for request in (
        pb.ExecSyncRequest(container_id="c", cmd=["sh", "-c", "true"], timeout=-1),
        pb.ListContainersRequest(filter=pb.ContainerFilter()),  # an empty message is still written
        pb.ContainerFilter(state=pb.ContainerStateValue(state=pb.ContainerState.CONTAINER_CREATED)),
        pb.PodSandboxFilter(label_selector={"": "", "a": "é"}),
    ):
        assert encode(request) == bytes(request)
    assert encode(pb.ListContainersRequest(filter=pb.ContainerFilter())) == b"\n\x00"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_decode_alike_or_fail(data: bytes) -> None:
    """Bytes that are not a well-formed ListContainersResponse either decode to the library's message
    or raise ValueError, never something else."""
    try:
        expected = pb.ListContainersResponse.parse(data)
    except Exception:
        expected = None
    try:
        got = decode(pb.ListContainersResponse, data)
    except ValueError:
        return
    if expected is not None:
        assert got == expected


def test_unknown_fields_are_kept_for_reencoding() -> None:
    known = bytes(pb.ContainerMetadata(name="app", attempt=3))
    unknown = (
        bytes([(99 << 3 | 2) & 0x7F | 0x80, 99 >> 4, 3])
        + b"xyz"
        + bytes([100 << 3 & 0x7F | 0x80, 100 >> 4, 7])
    )
    data = known + unknown
    got = decode(pb.ContainerMetadata, data)
    assert (got.name, got.attempt) == ("app", 3)
    assert got._unknown_fields == pb.ContainerMetadata.parse(data)._unknown_fields == unknown
    assert bytes(got) == data


def test_numbers_packed_or_not_decode_alike() -> None:
    groups = [0, 1, -1, 2**40, -(2**63)]
    packed = bytes(pb.LinuxContainerSecurityContext(supplemental_groups=groups))
    unpacked = b"".join(bytes(pb.LinuxContainerSecurityContext(supplemental_groups=[g])) for g in groups)
    for data in (packed, unpacked, packed + unpacked):
        got = decode(pb.LinuxContainerSecurityContext, data)
        assert got == pb.LinuxContainerSecurityContext.parse(data)
    assert decode(pb.LinuxContainerSecurityContext, packed).supplemental_groups == groups


def test_a_truncated_answer_is_a_value_error() -> None:
    data = bytes(pb.ListContainersResponse(containers=[pb.Container(id="a" * 64, labels={"k": "v"})]))
    for cut in (1, 2, len(data) // 2, len(data) - 1):
        with pytest.raises(ValueError, match="ended inside"):
            decode(pb.ListContainersResponse, data[:cut])


def test_the_codec_decodes_with_it() -> None:
    message = pb.ContainerStatusResponse(
        status=pb.ContainerStatus(id="c1", state=pb.ContainerState.CONTAINER_EXITED, exit_code=-1),
        info={"info": "{}"},
    )
    codec = CriCodec()
    data = codec.encode(message, pb.ContainerStatusResponse)
    assert codec.decode(data, pb.ContainerStatusResponse) == message


@pytest.mark.parametrize("data", [b"\x0a\x02\xff\xfe", b"\xff" * 11, b"\x0b", b"\x12\x05ab", b"\x10\x01"])
def test_an_answer_that_does_not_decode_is_a_malformed_answer(data: bytes) -> None:
    """Not UTF-8, a varint too long, a wire type that does not exist, a truncation, a string sent as a
    number: all one error type, which the CRI client turns into a failed call."""
    with pytest.raises(MalformedAnswer, match="cannot decode VersionResponse"):
        CriCodec().decode(data, pb.VersionResponse)


def _container(i: int, state: pb.ContainerState = pb.ContainerState.CONTAINER_RUNNING) -> pb.Container:
    return pb.Container(
        id=f"c{i}",
        metadata=pb.ContainerMetadata(name="app"),
        state=state,
        labels={"io.kubernetes.pod.uid": f"uid-{i}"},
        annotations={"io.kubernetes.container.hash": "1"},
    )


def _listed(containers: list[pb.Container], memo: ItemMemo) -> list[pb.Container]:
    answer = decode(pb.ListContainersResponse, encode(pb.ListContainersResponse(containers=containers)), memo)
    return list(answer.containers)


def test_a_relist_reuses_the_items_that_did_not_change() -> None:
    memo = ItemMemo()
    first = _listed([_container(i) for i in range(3)], memo)
    changed = [_container(0), _container(1, pb.ContainerState.CONTAINER_EXITED), _container(2), _container(3)]
    second = _listed(changed, memo)
    assert second == changed  # equal to a plain decode...
    assert second[0] is first[0] and second[2] is first[2]  # ...and the unchanged items not decoded again
    assert second[1] is not first[1] and second[1].state == pb.ContainerState.CONTAINER_EXITED
    # an answer filtered to one pod (a pod's status) finds the items of the full relist
    assert _listed([_container(2)], memo)[0] is first[2]


@pytest.mark.parametrize("live", [3, 100])
def test_the_memo_keeps_two_generations_of_the_live_items(live: int) -> None:
    """A node churning through 50 generations of its pods: what the memo holds stays bounded by the live
    set, and the live items are found again after every turn of the generations."""
    memo = ItemMemo()
    bound = 2 * (generation(live) + live)  # each generation: its limit, and one answer past it
    for round_ in range(50):
        pods = [_container(round_ * 1000 + i) for i in range(live)]
        first = _listed(pods, memo)
        assert all(a is b for a, b in zip(first, _listed(pods, memo), strict=True))
        assert len(memo._current) + len(memo._previous) <= bound
