"""``CredentialProviderConfig`` decoding and validation (Go: ``plugin/config.go``) and plugin
registration (``plugin.go`` ``RegisterCredentialProviderPlugins``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kubelet_trio.credentialprovider import (
    CredentialProvider,
    CredentialProviderConfig,
    CredentialProviderConfigError,
    parse_go_duration,
    read_credential_provider_config,
    register_credential_provider_plugins,
    validate_credential_provider_config,
)
from kubelet_trio.credentialprovider.pluginconfig import ExecEnvVar, decode_credential_provider_config

V1 = "credentialprovider.kubelet.k8s.io/v1"
SUPPORTED = (
    '"credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1alpha1", '
    '"credentialprovider.kubelet.k8s.io/v1beta1"'
)

GOOD_YAML = f"""\
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages:
      - "*.dkr.ecr.*.amazonaws.com"
      - "registry.example:5000/team"
    defaultCacheDuration: 12h
    apiVersion: {V1}
    args: [get-credentials, --verbose]
    env:
      - name: AWS_PROFILE
        value: node
  - name: other
    matchImages: ["other.example"]
    defaultCacheDuration: "0s"
    apiVersion: credentialprovider.kubelet.k8s.io/v1beta1
"""


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("12h", 43200.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("300ms", 0.3),
        ("-2m", -120.0),
        ("+.5h", 1800.0),
        ("1h0m0.25s", 3600.25),
        ("10us", 1e-5),
        ("7µs", 7e-6),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "12", "h", ".s", "1d", "1 h", "1h-1m", "--1s"])
def test_bad_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="time: invalid duration"):
        parse_go_duration(text)


def test_a_good_config_decodes() -> None:
    config = decode_credential_provider_config(GOOD_YAML.encode())
    assert config == CredentialProviderConfig(
        (
            CredentialProvider(
                name="ecr-credential-provider",
                match_images=("*.dkr.ecr.*.amazonaws.com", "registry.example:5000/team"),
                default_cache_duration=43200.0,
                api_version=V1,
                args=("get-credentials", "--verbose"),
                env=(ExecEnvVar("AWS_PROFILE", "node"),),
            ),
            CredentialProvider(
                name="other",
                match_images=("other.example",),
                default_cache_duration=0.0,
                api_version="credentialprovider.kubelet.k8s.io/v1beta1",
            ),
        )
    )
    assert validate_credential_provider_config(config) == []


def test_json_is_accepted_too() -> None:
    document = {
        "apiVersion": "kubelet.config.k8s.io/v1alpha1",
        "kind": "CredentialProviderConfig",
        "providers": [{"name": "p", "matchImages": ["*"], "defaultCacheDuration": "1m", "apiVersion": V1}],
    }
    config = decode_credential_provider_config(json.dumps(document).encode())
    assert config.providers[0].default_cache_duration == 60.0


def provider_yaml(body: str) -> bytes:
    return (
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- " + body
    ).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"[1, 2]", "the configuration must be an object"),
        (b"apiVersion: kubelet.config.k8s.io/v1\n", "Object 'Kind' is missing"),
        (b"kind: CredentialProviderConfig\n", "Object 'apiVersion' is missing"),
        (
            b"apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n",
            'failed to decode "KubeletConfiguration" (wrong Kind)',
        ),
        (
            b"apiVersion: example.com/v1\nkind: CredentialProviderConfig\n",
            "failed to decode CredentialProviderConfig, unexpected Group: example.com",
        ),
        (
            b"apiVersion: kubelet.config.k8s.io/v9\nkind: CredentialProviderConfig\n",
            'unsupported apiVersion "kubelet.config.k8s.io/v9"',
        ),
        (
            b"apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nextra: 1\n",
            'strict decoding error: unknown field "extra"',
        ),
        (
            provider_yaml("name: p\n  color: red\n"),
            'strict decoding error: unknown field "providers[0].color"',
        ),
        (provider_yaml("name: 12\n"), "providers[0].name: must be a string"),
        (provider_yaml("name: p\n  matchImages: reg.example\n"), "providers[0].matchImages: must be a list"),
        (provider_yaml("name: p\n  matchImages: [1]\n"), "providers[0].matchImages[0]: must be a string"),
        (
            provider_yaml("name: p\n  defaultCacheDuration: 5\n"),
            "providers[0].defaultCacheDuration: must be a string",
        ),
        (
            provider_yaml("name: p\n  defaultCacheDuration: 5 minutes\n"),
            'providers[0].defaultCacheDuration: time: invalid duration "5 minutes"',
        ),
        (
            provider_yaml("name: p\n  env: [{name: A, valu: b}]\n"),
            'strict decoding error: unknown field "providers[0].env[0].valu"',
        ),
        (b"providers: [\n", "expected the node content, but found"),
    ],
)
def test_bad_documents_name_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(CredentialProviderConfigError) as caught:
        decode_credential_provider_config(data)
    assert str(caught.value).startswith(message)


def test_validation_reports_every_problem_with_its_field_path() -> None:
    config = CredentialProviderConfig(
        (
            CredentialProvider(name="a/b c", api_version="", match_images=(), default_cache_duration=None),
            CredentialProvider(
                name="dup",
                api_version="credentialprovider.kubelet.k8s.io/v2",
                match_images=("reg.example:x",),
                default_cache_duration=-1.0,
            ),
            CredentialProvider(name="dup", api_version=V1, match_images=("*",), default_cache_duration=0),
            CredentialProvider(name="..", api_version=V1, match_images=("*",), default_cache_duration=0),
        )
    )
    assert validate_credential_provider_config(config) == [
        "providers[0].name: Invalid value: \"a/b c\": provider name cannot contain '/'",
        'providers[0].name: Invalid value: "a/b c": provider name cannot contain spaces',
        "providers[0].apiVersion: Required value",
        "providers[0].matchImages: Required value: at least 1 item in matchImages is required",
        "providers[0].defaultCacheDuration: Required value",
        'providers[1].apiVersion: Unsupported value: "credentialprovider.kubelet.k8s.io/v2": '
        f"supported values: {SUPPORTED}",
        'providers[1].matchImages[0]: Invalid value: "reg.example:x": match image is invalid: '
        "invalid port after host",
        'providers[1].defaultCacheDuration: Invalid value: "-1s": must be greater than or equal to 0',
        'providers[2].name: Duplicate value: "dup"',
        "providers[3].name: Invalid value: \"..\": provider name cannot be '..'",
    ]
    assert validate_credential_provider_config(CredentialProviderConfig()) == [
        "providers: Required value: at least 1 item in plugins is required"
    ]


def test_token_attributes_are_refused() -> None:
    config = decode_credential_provider_config(
        provider_yaml(
            f"name: p\n  matchImages: ['*']\n  defaultCacheDuration: 1m\n  apiVersion: {V1}\n"
            "  tokenAttributes: {serviceAccountTokenAudience: x}\n"
        )
    )
    assert validate_credential_provider_config(config) == [
        "providers[0].tokenAttributes: Forbidden: tokenAttributes is not supported when "
        "KubeletServiceAccountTokenForCredentialProviders feature gate is disabled"
    ]


def one_provider(name: str) -> str:
    return (
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        f"- {{name: {name}, matchImages: ['*'], defaultCacheDuration: 1m, apiVersion: {V1}}}\n"
    )


def test_a_directory_of_configs_is_merged_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(one_provider("second"))
    (tmp_path / "a.json").write_text(one_provider("first"))
    (tmp_path / "c.txt").write_text("ignored")
    (tmp_path / "d.yml").mkdir()
    config = read_credential_provider_config(str(tmp_path))
    assert [p.name for p in config.providers] == ["first", "second"]
    (tmp_path / "e.yml").write_text(one_provider("first"))
    with pytest.raises(CredentialProviderConfigError, match='duplicate provider name "first" found'):
        read_credential_provider_config(str(tmp_path))


def test_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(CredentialProviderConfigError, match="credential provider config path is empty"):
        read_credential_provider_config("")
    with pytest.raises(CredentialProviderConfigError, match="unable to access path"):
        read_credential_provider_config(str(tmp_path / "missing.yaml"))
    with pytest.raises(CredentialProviderConfigError, match="no configuration files found in directory"):
        read_credential_provider_config(str(tmp_path))
    (tmp_path / "bad.yaml").write_text("kind: Nope\napiVersion: kubelet.config.k8s.io/v1\n")
    with pytest.raises(CredentialProviderConfigError) as caught:
        read_credential_provider_config(str(tmp_path / "bad.yaml"))
    assert (
        str(caught.value)
        == f'error decoding config "{tmp_path / "bad.yaml"}": failed to decode "Nope" (wrong Kind)'
    )


def test_registration_checks_the_bin_dir_and_the_binaries(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(one_provider("plugin"))
    bin_dir = tmp_path / "bin"
    with pytest.raises(
        CredentialProviderConfigError, match=f"^plugin binary directory {bin_dir} did not exist$"
    ):
        register_credential_provider_plugins(str(config), str(bin_dir))
    bin_dir.mkdir()
    binary = bin_dir / "plugin"
    with pytest.raises(
        CredentialProviderConfigError, match=f"^plugin binary executable {binary} did not exist$"
    ):
        register_credential_provider_plugins(str(config), str(bin_dir))
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o644)
    with pytest.raises(
        CredentialProviderConfigError, match=r"error inspecting binary executable .*permission denied"
    ):
        register_credential_provider_plugins(str(config), str(bin_dir))
    binary.chmod(0o755)
    [provider] = register_credential_provider_plugins(str(config), str(bin_dir))
    assert (provider.name, provider.match_images, provider.default_cache_duration) == ("plugin", ("*",), 60.0)


def test_registration_refuses_an_invalid_config(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n"
        "providers: [{name: p, matchImages: ['*'], apiVersion: x}]\n"
    )
    with pytest.raises(CredentialProviderConfigError) as caught:
        register_credential_provider_plugins(str(config), os.fspath(tmp_path))
    assert str(caught.value) == (
        "failed to validate credential provider config: ["
        f'providers[0].apiVersion: Unsupported value: "x": supported values: {SUPPORTED}, '
        "providers[0].defaultCacheDuration: Required value]"
    )
