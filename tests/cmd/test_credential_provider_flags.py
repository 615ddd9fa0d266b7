"""``--image-credential-provider-config`` and ``--image-credential-provider-bin-dir`` (flags in Go 1.33,
not configuration keys): the plugins are registered at startup when either is given, and one that cannot
be registered stops the kubelet with exit status 1 and Go's "Failed to register CRI auth plugins", naming
the file, before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubelet_trio.cmd.kubelet import CredentialProvidersError, register_credential_providers
from kubelet_trio.options import (
    CredentialProviderSettings,
    OptionsError,
    component_configs,
    load_options,
)
from tests.credentialprovider.plugins import config_yaml, provider, write_plugin


def flags(config: Path | str, bin_dir: Path | str) -> list[str]:
    return [f"--image-credential-provider-config={config}", f"--image-credential-provider-bin-dir={bin_dir}"]


def providers_of(argv: list[str]) -> CredentialProviderSettings:
    return component_configs(load_options(argv)[0]).credential_providers


def test_the_flags_are_settings_and_not_configuration_keys(tmp_path: Path) -> None:
    options, _ = load_options(flags("/etc/cp.yaml", "/opt/cp"))
    assert (options.image_credential_provider_config, options.image_credential_provider_bin_dir) == (
        "/etc/cp.yaml",
        "/opt/cp",
    )
    file = tmp_path / "kubelet.yaml"
    file.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "imageCredentialProviderConfig: /etc/cp.yaml\n"
    )
    options, warnings = load_options(["--config", str(file)])
    assert options.image_credential_provider_config == ""
    assert any("imageCredentialProviderConfig" in str(w.fields) for w in warnings)


def test_plugins_are_registered_when_a_flag_is_given(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    write_plugin(bin_dir, "login", "respond(cacheKeyType='Global', auth={})")
    config = tmp_path / "cp.yaml"
    config.write_text(config_yaml(provider("login", ["*.sim"])))
    assert register_credential_providers(providers_of([])) == ()
    [registered] = register_credential_providers(providers_of(flags(config, bin_dir)))
    assert (registered.name, registered.match_images) == ("login", ("*.sim",))


@pytest.mark.parametrize(
    ("config_text", "make_bin", "reason"),
    [
        (None, True, "unable to access path"),
        ("kind: CredentialProviderConfig\napiVersion: kubelet.config.k8s.io/v1\nproviders: 3\n", True, ""),
        (config_yaml(provider("absent", ["*.sim"])), True, "did not exist"),
        (config_yaml(provider("login", ["*.sim"])), False, "plugin binary directory"),
    ],
)
def test_an_unusable_configuration_stops_the_kubelet(
    tmp_path: Path, config_text: str | None, make_bin: bool, reason: str
) -> None:
    bin_dir = tmp_path / "bin"
    if make_bin:
        write_plugin(bin_dir, "login", "respond(cacheKeyType='Global', auth={})")
    config = tmp_path / "cp.yaml"
    if config_text is not None:
        config.write_text(config_text)
    options, _ = load_options(flags(config, bin_dir))
    with pytest.raises(CredentialProvidersError) as caught:
        register_credential_providers(component_configs(options).credential_providers)
    message = str(caught.value)
    assert message.startswith("Failed to register CRI auth plugins (--image-credential-provider-config")
    assert str(config) in message and reason in message


def test_the_daemon_exits_1_before_starting(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    config = tmp_path / "missing.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "kubelet_trio", "--runtime", "sim", "--pod-manifest-path", str(manifests),
         "--root-dir", str(tmp_path), "--port", "0", *flags(config, tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert (
        f"kubelet-trio: Failed to register CRI auth plugins (--image-credential-provider-config '{config}'"
        in (done.stderr)
    )


def test_a_flag_value_must_be_given() -> None:
    with pytest.raises(OptionsError):
        load_options(["--image-credential-provider-config"])
