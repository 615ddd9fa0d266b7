"""Security-relevant upstream settings this kubelet does not enforce (``options.UNENFORCED``): a flag and its
configuration key get the same treatment. A value asking for the protection is accepted with a warning of
its own per setting (apart from, and louder than, the one line naming harmless unknown keys); a value
asking for nothing is accepted silently; an invalid value is an error naming the flag or the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubelet_trio.options import (
    IGNORED_KEYS,
    NOT_ENFORCED,
    SETTINGS,
    UNENFORCED,
    OptionsError,
    OptionsWarning,
    load_options,
)
from kubelet_trio.upstream_flags import UPSTREAM_FLAGS

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

#: key -> (a flag value asking for the protection, the same in the file, a flag value asking for
#: nothing, the same in the file)
VALUES: dict[str, tuple[str, Any, str, Any]] = {
    "protectKernelDefaults": ("true", True, "false", False),
    "seccompDefault": ("true", True, "false", False),
    "enableDebuggingHandlers": ("false", False, "true", True),
    "enableServer": ("false", False, "true", True),
}
SPECS = {u.key: u for u in UNENFORCED}


def write_config(tmp_path: Path, key: str, value: Any) -> Path:
    import yaml

    config = tmp_path / "kubelet.yaml"
    config.write_text(HEADER + yaml.safe_dump({key: value}))
    return config


def test_the_table_is_upstream_and_apart_from_the_settings() -> None:
    assert set(VALUES) == set(SPECS)
    assert {u.flag.removeprefix("--") for u in UNENFORCED} <= UPSTREAM_FLAGS
    assert {u.key for u in UNENFORCED}.isdisjoint(s.key for s in SETTINGS)
    assert {u.flag for u in UNENFORCED}.isdisjoint(f for s in SETTINGS for f in s.flags)


@pytest.mark.parametrize("key", list(VALUES))
def test_flag_and_key_get_the_same_warning(tmp_path: Path, key: str) -> None:
    spec = SPECS[key]
    flag_value, file_value, _, _ = VALUES[key]
    _, from_flag = load_options([f"{spec.flag}={flag_value}"])
    config = write_config(tmp_path, key, file_value)
    _, from_file = load_options(["--config", str(config)])
    expected = {
        "setting": key,
        "flag": spec.flag,
        "value": file_value,
        "effect": spec.effect,
    }
    assert from_flag == [OptionsWarning(NOT_ENFORCED, {**expected, "source": spec.flag})]
    assert from_file == [OptionsWarning(NOT_ENFORCED, {**expected, "source": f"--config {config}"})]


@pytest.mark.parametrize("key", list(VALUES))
def test_a_value_asking_for_nothing_is_accepted_silently(tmp_path: Path, key: str) -> None:
    spec = SPECS[key]
    _, _, flag_value, file_value = VALUES[key]
    assert load_options([f"{spec.flag}={flag_value}"])[1] == []
    assert load_options(["--config", str(write_config(tmp_path, key, file_value))])[1] == []
    # the flag wins over the file, as for every setting: a protection asked for in the file, turned
    # off on the command line, is not warned about
    asking = write_config(tmp_path, key, VALUES[key][1])
    assert load_options(["--config", str(asking), f"{spec.flag}={flag_value}"])[1] == []


def test_a_bare_boolean_flag_is_true() -> None:
    _, warnings = load_options(["--protect-kernel-defaults", "--seccomp-default"])
    assert [(w.fields["setting"], w.fields["value"]) for w in warnings] == [
        ("protectKernelDefaults", True),
        ("seccompDefault", True),
    ]


def test_invalid_values_name_the_flag_or_the_key(tmp_path: Path) -> None:
    with pytest.raises(OptionsError) as caught:
        load_options(["--system-reserved-cgroup"])
    assert str(caught.value) == "flag needs an argument: --system-reserved-cgroup"
    config = write_config(tmp_path, "protectKernelDefaults", "yes please")
    with pytest.raises(OptionsError) as caught:
        load_options(["--config", str(config)])
    assert str(caught.value) == (
        f"--config {config}: invalid value for protectKernelDefaults: 'yes please': expected true or false"
    )


def test_the_cli_logs_a_louder_line_per_setting_apart_from_harmless_keys(tmp_path: Path) -> None:
    manifests = tmp_path / "pods"
    manifests.mkdir()
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        HEADER + f"staticPodPath: {manifests}\nprotectKernelDefaults: true\nmemorySwap: {{}}\n"
        "seccompDefault: false\n"
    )
    result = subprocess.run(
        [
            sys.executable, "-m", "kubelet_trio", "--config", str(config), "--runonce", "--runtime", "sim",
            "--enable-server=false", "--root-dir", str(tmp_path / "root"),
            "--pod-logs-dir", str(tmp_path / "logs"),
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    loud = [line for line in lines if f'"{NOT_ENFORCED}"' in line]
    assert len(loud) == 2 and all(line.startswith("W") for line in loud)  # one line per setting
    kernel, server = loud  # in the table's order
    assert 'setting="enableServer"' in server and "value=false" in server
    assert 'source="--enable-server"' in server and 'effect="the Kubelet API still serves' in server
    assert 'setting="protectKernelDefaults"' in kernel and "value=true" in kernel
    assert f'source="--config {config}"' in kernel
    [harmless] = [line for line in lines if f'"{IGNORED_KEYS}"' in line]
    assert 'keys="memorySwap"' in harmless and "protectKernelDefaults" not in harmless
    assert not any("seccompDefault" in line for line in lines)  # false asks for nothing
