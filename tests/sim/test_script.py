"""The behaviour-script grammar: every clause, and errors that name the clause at fault."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubelet_trio.sim.script import (
    RUN,
    Behaviour,
    ExecResult,
    ExecRule,
    OutputLine,
    ScriptError,
    parse_duration,
    parse_script,
)

SECOND = 10**9


@pytest.mark.parametrize("script", ["", "run", " run ; ", ";;run;"])
def test_run_is_the_default(script: str) -> None:
    assert parse_script(script) == RUN
    assert RUN.exit_code is None


def test_exit_at_once() -> None:
    assert parse_script("exit 3") == Behaviour(exit_code=3, exit_after_ns=0)
    assert parse_script("exit 0").exit_code == 0


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("500ms", 500_000_000),
        ("2s", 2 * SECOND),
        ("1.5m", 90 * SECOND),
        ("1h", 3600 * SECOND),
        ("0.25s", SECOND // 4),
        (".5s", SECOND // 2),
        ("0s", 0),
    ],
)
def test_durations_are_exact(text: str, ns: int) -> None:
    assert parse_duration(text) == ns
    assert parse_script(f"exit 1 after {text}").exit_after_ns == ns


def test_ignore_sigterm() -> None:
    behaviour = parse_script("ignore-sigterm")
    assert behaviour.ignore_sigterm
    assert behaviour.exit_code is None


def test_output_lines_keep_clause_order() -> None:
    behaviour = parse_script('print "hello" "world"; stderr oops; print "a;b"; exit 3 after 2s')
    assert behaviour.output == (
        OutputLine("stdout", "hello"),
        OutputLine("stdout", "world"),
        OutputLine("stderr", "oops"),
        OutputLine("stdout", "a;b"),
    )
    assert (behaviour.exit_code, behaviour.exit_after_ns) == (3, 2 * SECOND)


def test_exec_clauses() -> None:
    behaviour = parse_script(
        "ignore-sigterm; exec cat /tmp/ready -> 0 \"ok\"; exec sh -c 'exit 4' -> 4; "
        'exec sleep 30 -> 0 after 30s; exec probe -> 2 "not yet" after 1.5s; exec say -> 0 "after"'
    )
    assert behaviour.ignore_sigterm
    assert behaviour.execs == (
        ExecRule(("cat", "/tmp/ready"), ExecResult(0, stdout=b"ok")),
        ExecRule(("sh", "-c", "exit 4"), ExecResult(4)),
        ExecRule(("sleep", "30"), ExecResult(0, delay_ns=30 * SECOND)),
        ExecRule(("probe",), ExecResult(2, stdout=b"not yet", delay_ns=1_500_000_000)),
        ExecRule(("say",), ExecResult(0, stdout=b"after")),
    )


def test_exec_results_scripted_first_then_builtins() -> None:
    behaviour = parse_script('exec cat /tmp/ready -> 0 "ok"; exec true -> 7; exec cat /tmp/ready -> 9')
    assert behaviour.exec_result(["cat", "/tmp/ready"]) == ExecResult(0, stdout=b"ok")  # first wins
    assert behaviour.exec_result(["true"]).exit_code == 7  # a script may override a builtin
    assert RUN.exec_result(["true"]) == ExecResult(0)
    assert RUN.exec_result(["false"]) == ExecResult(1)
    assert RUN.exec_result(["echo", "a", "b c"]) == ExecResult(0, stdout=b"a b c\n")
    assert RUN.exec_result(["echo"]) == ExecResult(0, stdout=b"\n")
    assert RUN.exec_result(["cat", "/tmp/x y"]) == ExecResult(
        126, stderr=b"sim: no scripted result for exec cat '/tmp/x y'\n"
    )


@pytest.mark.parametrize(
    ("script", "clause", "problem"),
    [
        ("run; explode", "clause 2 'explode'", "unknown clause 'explode'"),
        ("exit three", "clause 1 'exit three'", "integer"),
        ("exit 256", "clause 1 'exit 256'", "0-255"),
        ("exit -1", "clause 1 'exit -1'", "0-255"),
        ("exit", "clause 1 'exit'", "expected 'exit K'"),
        ("exit 1 later 2s", "clause 1 'exit 1 later 2s'", "expected 'exit K'"),
        ("exit 1 after 2", "clause 1 'exit 1 after 2'", "bad duration '2'"),
        ("exit 1 after 2d", "clause 1 'exit 1 after 2d'", "bad duration '2d'"),
        ("exit 1; exit 2", "clause 2 'exit 2'", "more than one 'exit'"),
        ("run; exit 2", "clause 2 'exit 2'", "conflicts with an earlier 'run'"),
        ("exit 2; run", "clause 2 'run'", "conflicts with an earlier 'exit'"),
        ("run now", "clause 1 'run now'", "takes no arguments"),
        ("ignore-sigterm please", "clause 1 'ignore-sigterm please'", "takes no arguments"),
        ("print", "clause 1 'print'", "at least one line"),
        ("stderr", "clause 1 'stderr'", "at least one line"),
        ('print "unclosed', "clause 1 'print \"unclosed'", "No closing quotation"),
        ("exec cat", "clause 1 'exec cat'", "missing '->'"),
        ("exec -> 0", "clause 1 'exec -> 0'", "no command before '->'"),
        ("exec cat ->", "clause 1 'exec cat ->'", "no exit code"),
        ("exec cat -> x", "clause 1 'exec cat -> x'", "integer"),
        ('exec cat -> 0 "a" "b"', 'clause 1 \'exec cat -> 0 "a" "b"\'', "too many words"),
        ("exec cat -> 0 after soon", "clause 1 'exec cat -> 0 after soon'", "bad duration 'soon'"),
    ],
)
def test_errors_name_the_clause(script: str, clause: str, problem: str) -> None:
    with pytest.raises(ScriptError) as info:
        parse_script(script)
    message = str(info.value)
    assert message.startswith(clause + ":"), message
    assert problem in message


def test_script_error_is_a_value_error() -> None:
    assert issubclass(ScriptError, ValueError)


lines = st.lists(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=0),
    min_size=1,
    max_size=5,
)


@given(lines)
def test_print_round_trips_any_shell_quoted_text(texts: list[str]) -> None:
    script = "print " + " ".join(shlex.quote(t) for t in texts) + "; exit 0"
    behaviour = parse_script(script)
    assert [line.text for line in behaviour.output] == texts
    assert behaviour.exit_code == 0


@given(
    st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")), min_size=1)
)
def test_exec_argv_round_trips(argv: list[str]) -> None:
    argv = [a for a in argv if a != "->"] or ["probe"]
    behaviour = parse_script(f"exec {shlex.join(argv)} -> 5")
    assert behaviour.exec_result(argv).exit_code == 5
