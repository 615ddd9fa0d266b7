"""Adding a setting is one declaration: a ``setting(...)`` field of ``KubeletOptions``.

The one place is that field (``kubelet_trio/options/settings.py``). From it alone come the flag
(``--new-thing``, read by pflag's rules), the ``KubeletConfiguration`` key (``newThing``), the default
when neither gives it, the ``--help`` line (with its default and key) and the ``/configz`` entry. A
component that needs the value has a field of the same name in its own configuration (which is also
built without the command line, by embedders and tests), and ``component_configs`` fills it in by name
(``options.component.from_settings``): nothing maps it by hand. The daemon's own code reads it as
``options.<name>``.

The setting here is declared on a test-local subclass of ``KubeletOptions``, so the real table is left
as it is.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from kubelet_trio.configz import kubelet_configuration
from kubelet_trio.options import (
    SETTINGS,
    KubeletOptions,
    OptionsError,
    component_configs,
    load_options,
    parsers,
)
from kubelet_trio.options.component import from_settings
from kubelet_trio.options.help import help_text
from kubelet_trio.options.settings import CONFIG_API_VERSION, CONFIG_KIND, G_NODE, setting


@attrs.frozen(kw_only=True)
class WithNewThing(KubeletOptions):
    new_thing: str = setting(
        flag="--new-thing",
        key="newThing",
        parse=parsers.string,
        default="plain",
        help="a setting declared only in this test",
        group=G_NODE,
        metavar="THING",
    )


def new_thing(argv: list[str]) -> str:
    options, _ = load_options(argv, WithNewThing)
    assert isinstance(options, WithNewThing)
    return options.new_thing


def test_its_flag_parses() -> None:
    assert new_thing(["--new-thing=flagged"]) == "flagged"
    assert new_thing(["--new-thing", "spaced"]) == "spaced"
    assert "new_thing" in load_options(["--new-thing=flagged"], WithNewThing)[0].explicit


def test_its_key_loads_from_a_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text(f"apiVersion: {CONFIG_API_VERSION}\nkind: {CONFIG_KIND}\nnewThing: filed\n")
    assert new_thing(["--config", str(path)]) == "filed"
    assert load_options(["--config", str(path)], WithNewThing)[1] == []  # its key is not an unknown one
    assert new_thing(["--config", str(path), "--new-thing=flagged"]) == "flagged"  # flags win over the file


def test_its_default_applies_when_neither_gives_it() -> None:
    assert new_thing([]) == "plain"
    assert "new_thing" not in load_options([], WithNewThing)[0].explicit
    assert WithNewThing().new_thing == "plain"


def test_its_help_line_appears_in_its_group(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        load_options(["--help"], WithNewThing)
    assert exited.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    text = "a setting declared only in this test (default plain) [newThing]"
    line = "      --new-thing THING".ljust(38) + text
    assert line in lines
    group = lines.index(f"{G_NODE}:")
    assert group < lines.index(line) < lines.index("", group)


def test_it_is_served_by_configz() -> None:
    options, _ = load_options(["--new-thing=flagged"], WithNewThing)
    assert kubelet_configuration(options)["newThing"] == "flagged"


def test_a_component_field_of_its_name_gets_it() -> None:
    @attrs.frozen
    class Consumer:
        new_thing: str = "plain"
        max_pods: int = 0
        unrelated: float = 1.0

    options, _ = load_options(["--new-thing=flagged", "--max-pods=7"], WithNewThing)
    assert from_settings(Consumer, options) == Consumer(new_thing="flagged", max_pods=7)
    assert from_settings(Consumer, options, new_thing="computed").new_thing == "computed"
    assert component_configs(options).kubelet.max_pods == 7  # the real components take it as it is


def test_the_real_table_is_left_as_it_is() -> None:
    assert "new_thing" not in {s.dest for s in SETTINGS}
    assert "--new-thing" not in help_text()
    with pytest.raises(OptionsError, match="new-thing"):
        load_options(["--new-thing=flagged"])
