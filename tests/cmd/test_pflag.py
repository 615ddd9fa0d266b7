"""The daemon's flags read as Go's pflag reads them (in-process): no abbreviations, optional boolean values,
``-v``, ``--version``, aliases, drop-in configuration, and upstream flags named when refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubelet_trio import __version__
from kubelet_trio.cliflag import FlagError, FlagSpec, parse_flags
from kubelet_trio.options import OptionsError, load_options

UNSUPPORTED = "is an upstream kubelet flag not supported by kubelet-trio"
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def test_no_abbreviations() -> None:
    with pytest.raises(OptionsError, match=r"^unknown flag: --pod-manifest$"):
        load_options(["--pod-manifest=/etc/kubernetes/manifests"])
    with pytest.raises(OptionsError, match=r"^unknown flag: --pod-manifest$"):
        load_options(["--pod-manifest", "/etc/kubernetes/manifests"])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--anonymous-auth"], True),
        (["--anonymous-auth=true"], True),
        (["--anonymous-auth=T"], True),
        (["--anonymous-auth=1"], True),
        (["--anonymous-auth=false"], False),
        (["--anonymous-auth=False"], False),
        (["--anonymous-auth", "--anonymous-auth=0"], False),  # the last one wins
        ([], False),
    ],
)
def test_booleans_take_an_optional_value(argv: list[str], expected: bool) -> None:
    options, _ = load_options(argv)
    assert options.anonymous_auth is expected


def test_a_boolean_never_takes_the_next_argument() -> None:
    options, _ = load_options(["--runonce", "--pod-manifest-path", "/m"])
    assert (options.runonce, options.pod_manifest_path) == (True, "/m")
    with pytest.raises(OptionsError) as caught:
        load_options(["--register-node", "false"])
    assert str(caught.value) == (
        "unknown command 'false' (--register-node is a boolean flag: write --register-node=false)"
    )
    with pytest.raises(
        OptionsError, match=r"invalid value 'maybe' for --fail-swap-on: expected true or false"
    ):
        load_options(["--fail-swap-on=maybe"])


@pytest.mark.parametrize("argv", [["-v", "4"], ["-v=4"], ["-v4"], ["--v=4"], ["--v", "4"]])
def test_verbosity_spellings(argv: list[str]) -> None:
    options, _ = load_options(argv)
    assert options.verbosity == 4
    assert "verbosity" in options.explicit


def test_a_value_flag_takes_the_next_argument_even_with_a_dash() -> None:
    options, _ = load_options(["--hostname-override", "-node-a"])
    assert options.hostname_override == "-node-a"
    with pytest.raises(OptionsError, match=r"^flag needs an argument: --max-pods$"):
        load_options(["--max-pods"])
    with pytest.raises(OptionsError, match=r"^flag needs an argument: -v$"):
        load_options(["-v"])


def test_underscores_read_as_dashes_and_the_last_value_wins() -> None:
    options, _ = load_options(["--pod_manifest_path=/a", "--max-pods=3", "--max_pods=4"])
    assert (options.pod_manifest_path, options.max_pods) == ("/a", 4)


def test_repeatable_flags_collect() -> None:
    options, _ = load_options(["--node-labels=a=1,b=2", "--node-labels", "c=3", "--cluster-dns=10.0.0.10"])
    assert options.node_labels == {"a": "1", "b": "2", "c": "3"}
    assert options.cluster_dns == ("10.0.0.10",)


def test_logging_format_and_its_alias() -> None:
    assert load_options(["--logging-format=json"])[0].logging_format == "json"
    assert load_options(["--log-format", "json"])[0].logging_format == "json"
    assert load_options(["--log-format=json", "--logging-format=text"])[0].logging_format == "text"
    with pytest.raises(
        OptionsError, match=r"invalid value 'xml' for --log-format: expected one of text, json"
    ):
        load_options(["--log-format=xml"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["positional"], "unknown command 'positional'"),
        (["--", "x"], "unknown command 'x'"),
        (["-x"], "unknown shorthand flag: 'x' in -x"),
        (["-pod-manifest-path=/m"], "unknown shorthand flag: 'p' in -pod-manifest-path=/m"),
        (["---v=1"], "bad flag syntax: ---v=1"),
        (["--=1"], "bad flag syntax: --=1"),
        (["--no-such-flag"], "unknown flag: --no-such-flag"),
        (["--cpu-manager-policy=static"], f"flag --cpu-manager-policy {UNSUPPORTED}"),
        (["--vmodule", "x=4"], f"flag --vmodule {UNSUPPORTED}"),
        (["--network-plugin=cni"], f"flag --network-plugin {UNSUPPORTED} (removed from the Go kubelet in 1.24)"),  # noqa: E501
        (["--cgroup-driver=v3"], "invalid value 'v3' for --cgroup-driver: expected one of cgroupfs, systemd"),
    ],
)  # fmt: skip
def test_refused_command_lines_say_why(argv: list[str], message: str) -> None:
    with pytest.raises(OptionsError) as caught:
        load_options(argv)
    assert str(caught.value) == message


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["-h"], ["--pod-manifest-path=/m", "--help"]):
        with pytest.raises(SystemExit) as caught:
            load_options(argv)
        assert caught.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith("Usage:\n  kubelet-trio [flags]\n")
        assert "  -v, --v LEVEL" in out and "      --logging-format, --log-format {text,json}" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        load_options(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out == f"Kubernetes v1.36.0+kubelet-trio.{__version__}\n"
    with pytest.raises(SystemExit):
        load_options(["--pod-manifest-path=/m", "--version=raw"])
    raw = capsys.readouterr().out
    assert raw.startswith(
        f'version.Info{{Major:"1", Minor:"36", GitVersion:"v1.36.0+kubelet-trio.{__version__}", GitCommit:""'
    )
    assert re.search(r'GoVersion:"", Compiler:"CPython \d+\.\d+\.\d+\w*", Platform:"linux/\w+"\}\n$', raw), (
        raw
    )
    options, _ = load_options(["--version=false", "--max-pods=3"])  # false: no version, go on
    assert options.max_pods == 3
    with pytest.raises(OptionsError, match="invalid value 'full' for --version"):
        load_options(["--version=full"])


def test_config_dir_drop_ins_apply_in_name_order_under_the_flags(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(HEADER + "maxPods: 10\nsyncFrequency: 30s\nclusterDomain: base.local\n")
    drop_ins = tmp_path / "config.d"
    drop_ins.mkdir()
    (drop_ins / "20-late.conf").write_text(HEADER + "maxPods: 30\n")
    (drop_ins / "10-early.conf").write_text(HEADER + "maxPods: 20\nclusterDomain: early.local\n")
    (drop_ins / "99-ignored.yaml").write_text("not: a drop-in (no .conf suffix)\n")
    options, _ = load_options(["--config", str(config), "--config-dir", str(drop_ins)])
    assert (options.max_pods, options.sync_frequency, options.cluster_domain) == (30, 30, "early.local")
    options, _ = load_options(["--config-dir", str(drop_ins), "--max-pods=40", "--config", str(config)])
    assert options.max_pods == 40
    (drop_ins / "30-bad.conf").write_text(HEADER + "maxPods: lots\n")
    with pytest.raises(OptionsError) as caught:
        load_options(["--config-dir", str(drop_ins)])
    assert str(caught.value).startswith(f"--config-dir {drop_ins / '30-bad.conf'}: invalid value for maxPods")


def test_the_parser_keeps_the_order_of_values() -> None:
    flags = {"a": FlagSpec("a", boolean=True), "b": FlagSpec("b", repeatable=True, shorthand="b")}
    parsed = parse_flags(["--a", "-b", "1", "--b=2", "-b3", "--a=false"], flags)
    assert parsed.items == [("a", "true"), ("b", "1"), ("b", "2"), ("b", "3"), ("a", "false")]
    assert parsed.values("b") == ["1", "2", "3"]
    with pytest.raises(FlagError, match="upstream"):
        parse_flags(["--c"], flags, unknown=lambda name: f"--{name} is upstream")


def test_fail_swap_on_refuses_a_machine_with_swap(tmp_path: Path) -> None:
    from kubelet_trio.cmd.kubelet import check_swap

    swaps = tmp_path / "swaps"
    swaps.write_text("Filename\tType\tSize\tUsed\tPriority\n")
    fail_swap_on = load_options([])[0].fail_swap_on
    assert fail_swap_on
    check_swap(fail_swap_on, str(swaps))  # only the header: no swap
    swaps.write_text(swaps.read_text() + "/swap.img\tfile\t2097148\t0\t-2\n")
    with pytest.raises(RuntimeError, match=r"^running with swap on is not supported, please disable swap"):
        check_swap(fail_swap_on, str(swaps))
    check_swap(load_options(["--fail-swap-on=false"])[0].fail_swap_on, str(swaps))
    check_swap(fail_swap_on, str(tmp_path / "missing"))


def test_fail_cgroupv1_refuses_a_cgroup_v1_host_when_asked(tmp_path: Path) -> None:
    """``failCgroupV1`` (``--fail-cgroupv1``): Go's validation message on a v1 host; off by default here."""
    from kubelet_trio.cmd.kubelet import check_cgroup_version

    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    (v1 / "memory").mkdir(parents=True)
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory pids\n")
    default = load_options([])[0].fail_cgroupv1
    assert default is False
    check_cgroup_version(default, str(v1))
    asked = load_options(["--fail-cgroupv1=true"])[0].fail_cgroupv1
    check_cgroup_version(asked, str(v2))
    with pytest.raises(RuntimeError, match=r"^kubelet is configured to not run on a host using cgroup v1\. "):
        check_cgroup_version(asked, str(v1))
