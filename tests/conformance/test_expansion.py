"""Containers' command and args against the image's ENTRYPOINT/CMD, and ``$(VAR)`` expansion in env,
command and args (upstream: test/e2e/common/node/containers.go, expansion.go)."""

from __future__ import annotations

import pytest

from kubelet_trio.testing.images import build_image, busybox_layer, push_image
from tests.conformance._helpers_f import gather, output_of
from tests.conformance.conftest import Cluster, Namespace, after

ENTRYPOINT = ["/bin/echo", "entrypoint"]
CMD = ["default", "arguments"]


@pytest.fixture(scope="module")
def entrypoint_image(cluster: Cluster) -> str:
    """busybox with ENTRYPOINT ``/bin/echo entrypoint`` and CMD ``default arguments``, on the session's
    registry."""
    image = build_image(busybox_layer(), entrypoint=ENTRYPOINT, cmd=CMD)
    registry = cluster.cri.registry.address
    push_image(registry, "kubelet-trio/entrypoint-tester", "1", image)
    return f"{registry}/kubelet-trio/entrypoint-tester:1"


async def test_command_and_args_override_entrypoint_and_cmd(ns: Namespace, entrypoint_image: str) -> None:
    """No command/args: ENTRYPOINT + CMD. Args only: ENTRYPOINT + args. Command only: the command, CMD
    ignored. Both: command + args."""
    cases = {
        "defaults": {},
        "args-only": {"args": ["override", "arguments"]},
        "command-only": {"command": ["/bin/echo", "command"]},
        "both": {"command": ["/bin/echo", "command"], "args": ["override", "arguments"]},
    }
    deadline = after(90)
    logs = await gather(
        *(
            lambda name=name, fields=fields: output_of(
                ns,
                ns.pod(name, containers=[{"name": "c", "image": entrypoint_image, **fields}]),
                deadline=deadline,
            )
            for name, fields in cases.items()
        )
    )
    assert dict(zip(cases, logs, strict=True)) == {
        "defaults": "entrypoint default arguments\n",
        "args-only": "entrypoint override arguments\n",
        "command-only": "command\n",
        "both": "command override arguments\n",
    }


async def test_variable_expansion_in_env_command_and_args(ns: Namespace) -> None:
    env = [
        {"name": "FOO", "value": "foo-value"},
        {"name": "BAR", "value": "bar-value"},
        {"name": "FOOBAR", "value": "$(FOO);;$(BAR)"},
        # Only variables defined earlier expand; unknown ones and $$ stay literal.
        {"name": "EARLY", "value": "$(LATE)-x"},
        {"name": "LATE", "value": "late"},
        {"name": "UNKNOWN", "value": "$(NOPE)"},
        {"name": "ESCAPED", "value": "$$(FOO)"},
        {"name": "DOLLARS", "value": "$$$(FOO)"},
    ]
    test_var = [{"name": "TEST_VAR", "value": "test-value"}]
    deadline = after(90)
    composed, in_command, in_args, escaped = await gather(
        lambda: output_of(
            ns, ns.pod("env", containers=[ns.container("c", "env", env=env)]), deadline=deadline
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "command", containers=[ns.container("c", 'TEST_VAR=wrong echo "$(TEST_VAR)"', env=test_var)]
            ),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "args",
                containers=[
                    {
                        **ns.container("c", env=test_var),
                        "command": ["sh", "-c"],
                        "args": ['TEST_VAR=wrong echo "$(TEST_VAR)"'],
                    }
                ],
            ),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "escaped",
                containers=[
                    {
                        **ns.container("c", env=test_var),
                        "command": ["/bin/echo"],
                        "args": ["$$(TEST_VAR)", "$(TEST_VAR)", "$$$(TEST_VAR)", "$(MISSING)", "$TEST_VAR"],
                    }
                ],
            ),
            deadline=deadline,
        ),
    )
    lines = set(composed.splitlines())
    assert {
        "FOO=foo-value",
        "BAR=bar-value",
        "FOOBAR=foo-value;;bar-value",
        "EARLY=$(LATE)-x",
        "LATE=late",
        "UNKNOWN=$(NOPE)",
        "ESCAPED=$(FOO)",
        "DOLLARS=$foo-value",
    } <= lines, composed
    assert in_command == "test-value\n"
    assert in_args == "test-value\n"
    assert escaped == "$(TEST_VAR) test-value $test-value $(MISSING) $TEST_VAR\n"
