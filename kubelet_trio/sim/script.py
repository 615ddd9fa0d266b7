"""The behaviour scripts of simulated containers.

A script says what a container "does" when SimRuntime runs it. It is a string of clauses separated
by ``;`` (a ``;`` inside quotes does not separate), each clause split into tokens like a shell would
(:func:`shlex.split`):

``run``
    Run until stopped. This is the default; an empty script means ``run``.
``exit K``
    Exit at once with code K (0-255) when started.
``exit K after D``
    Run for duration D, then exit with code K. D is a number with a unit: ``500ms``, ``2s``,
    ``1.5m``, ``1h``. ``finished_at`` is exactly ``started_at + D``.
``ignore-sigterm``
    SIGTERM is ignored: StopContainer waits its whole timeout, then SIGKILLs (exit code 137), unless
    a scripted ``exit K after D`` comes first. Without it a stopped container exits at once with 143
    (128 + SIGTERM). A timeout of 0 always SIGKILLs at once (137).
``print "line" ...``
    Lines written to stdout (the CRI log) when the container starts.
``stderr "line" ...``
    Lines written to stderr likewise. Output clauses keep their order in the log.
``exec ARGV... -> K ["stdout text"] [after D]``
    ExecSync of exactly that argv exits with code K and that stdout (verbatim, no newline added),
    answering after D. A D longer than the ExecSync timeout gives the CRI timeout error;
    ``after 1h`` is as good as a hang. The first matching ``exec`` clause wins. Streaming exec
    (``kubectl exec``) answers the same way.
``listen PORT...``
    The container accepts connections on these ports: a port-forward to one is a loopback echo (what
    is sent comes back); a port-forward to any other port is refused.

At most one ``exit`` clause, and not together with ``run``. A script that does not parse raises
:class:`ScriptError` naming the clause, e.g. ``clause 2 'exit three': exit code must be an integer
0-255, got 'three'``.

ExecSync of an argv no clause names: ``true`` → 0, ``false`` → 1, ``echo ARGS...`` → 0 with the
args joined by spaces plus ``"\\n"``, anything else → 126 with stderr
``sim: no scripted result for exec <argv>``.

Examples::

    print "hello" "world"; exit 3 after 2s
    ignore-sigterm; exec cat /tmp/ready -> 0 "ok"
    exit 1 after 5s                      # crashes every time it is (re)started: a crash loop
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Literal

import attrs

NS_PER_UNIT = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_DURATION = re.compile(r"(?P<num>\d+(?:\.\d*)?|\.\d+)(?P<unit>ms|s|m|h)")

Stream = Literal["stdout", "stderr"]


class ScriptError(ValueError):
    """A behaviour script does not parse; the message names the offending clause."""


@attrs.frozen
class OutputLine:
    """One line a container writes when it starts."""

    stream: Stream
    text: str


@attrs.frozen
class ExecResult:
    """What an ExecSync answers: exit code, output, and how long it takes to answer."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    delay_ns: int = 0


@attrs.frozen
class ExecRule:
    """``exec ARGV... -> K ["stdout"] [after D]``."""

    argv: tuple[str, ...]
    result: ExecResult


@attrs.frozen
class Behaviour:
    """A parsed script. ``exit_code is None`` means the container runs until it is stopped."""

    exit_code: int | None = None
    exit_after_ns: int = 0
    ignore_sigterm: bool = False
    output: tuple[OutputLine, ...] = ()
    execs: tuple[ExecRule, ...] = ()
    listens: tuple[int, ...] = ()
    #: Lines written again every ``repeat_period_ns`` from the start on (a logging loop).
    repeat: tuple[OutputLine, ...] = ()
    repeat_period_ns: int = 0
    #: An interactive shell: runs what arrives on stdin (attach) and exits at its end.
    reads_stdin: bool = False
    #: The reason the natural exit reports, when not the exit code's (``OOMKilled``).
    exit_reason: str = ""

    def scripted_exec(self, argv: Sequence[str]) -> ExecResult | None:
        """The answer of the first ``exec`` clause naming ``argv``, if any."""
        key = tuple(argv)
        for rule in self.execs:
            if rule.argv == key:
                return rule.result
        return None

    def exec_result(self, argv: Sequence[str]) -> ExecResult:
        """The scripted (or built-in) answer to an ExecSync of ``argv``."""
        found = self.scripted_exec(argv)
        return found if found is not None else builtin_exec_result(tuple(argv))


RUN = Behaviour()


def builtin_exec_result(argv: tuple[str, ...]) -> ExecResult:
    if argv == ("true",):
        return ExecResult(0)
    if argv == ("false",):
        return ExecResult(1)
    if argv and argv[0] == "echo":
        return ExecResult(0, stdout=(" ".join(argv[1:]) + "\n").encode())
    return ExecResult(126, stderr=f"sim: no scripted result for exec {shlex.join(argv)}\n".encode())


def parse_duration(text: str) -> int:
    """``500ms`` / ``2s`` / ``1.5m`` / ``1h`` → nanoseconds (exact, no float rounding)."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"bad duration {text!r}: expected a number with a unit ms, s, m or h (e.g. 2s)")
    try:
        value = Decimal(match["num"]) * NS_PER_UNIT[match["unit"]]
    except InvalidOperation as err:  # pragma: no cover - the regex admits only valid decimals
        raise ValueError(f"bad duration {text!r}") from err
    if value != value.to_integral_value():
        raise ValueError(f"bad duration {text!r}: finer than a nanosecond")
    return int(value)


def _exit_code(text: str) -> int:
    try:
        code = int(text)
    except ValueError:
        raise ValueError(f"exit code must be an integer 0-255, got {text!r}") from None
    if not 0 <= code <= 255:
        raise ValueError(f"exit code must be 0-255, got {code}")
    return code


def split_clauses(script: str) -> list[str]:
    """Split on ``;`` outside quotes (shell quoting rules: '...', "...", backslash escapes)."""
    clauses: list[str] = []
    current: list[str] = []
    quote: str | None = None
    escaped = False
    for ch in script:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote is not None:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == ";":
            clauses.append("".join(current))
            current = []
            continue
        current.append(ch)
    clauses.append("".join(current))
    return clauses


@attrs.define
class _Builder:
    exit_code: int | None = None
    exit_after_ns: int = 0
    saw_run: bool = False
    ignore_sigterm: bool = False
    output: list[OutputLine] = attrs.Factory(list)
    execs: list[ExecRule] = attrs.Factory(list)
    listens: list[int] = attrs.Factory(list)

    def clause(self, tokens: list[str]) -> None:
        verb, args = tokens[0], tokens[1:]
        if verb == "run":
            if args:
                raise ValueError("'run' takes no arguments")
            if self.exit_code is not None:
                raise ValueError("'run' conflicts with an earlier 'exit'")
            self.saw_run = True
        elif verb == "exit":
            self._exit(args)
        elif verb == "ignore-sigterm":
            if args:
                raise ValueError("'ignore-sigterm' takes no arguments")
            self.ignore_sigterm = True
        elif verb in ("print", "stderr"):
            stream: Stream = "stdout" if verb == "print" else "stderr"
            if not args:
                raise ValueError(f"'{verb}' needs at least one line")
            self.output.extend(OutputLine(stream, line) for line in args)
        elif verb == "exec":
            self.execs.append(_exec_rule(args))
        elif verb == "listen":
            if not args:
                raise ValueError("'listen' needs at least one port")
            self.listens.extend(_port(arg) for arg in args)
        else:
            raise ValueError(
                f"unknown clause {verb!r}: expected run, exit, ignore-sigterm, print, stderr, exec or listen"
            )

    def _exit(self, args: list[str]) -> None:
        if self.saw_run:
            raise ValueError("'exit' conflicts with an earlier 'run'")
        if self.exit_code is not None:
            raise ValueError("more than one 'exit' clause")
        if len(args) == 1:
            self.exit_code = _exit_code(args[0])
        elif len(args) == 3 and args[1] == "after":
            self.exit_code = _exit_code(args[0])
            self.exit_after_ns = parse_duration(args[2])
        else:
            raise ValueError("expected 'exit K' or 'exit K after D'")

    def build(self) -> Behaviour:
        return Behaviour(
            exit_code=self.exit_code,
            exit_after_ns=self.exit_after_ns,
            ignore_sigterm=self.ignore_sigterm,
            output=tuple(self.output),
            execs=tuple(self.execs),
            listens=tuple(self.listens),
        )


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"port must be an integer 1-65535, got {text!r}")
    return int(text)


def _exec_rule(args: list[str]) -> ExecRule:
    usage = "expected 'exec ARGV... -> K [\"stdout\"] [after D]'"
    if "->" not in args:
        raise ValueError(f"missing '->' ({usage})")
    arrow = args.index("->")
    argv, rest = tuple(args[:arrow]), args[arrow + 1 :]
    if not argv:
        raise ValueError(f"no command before '->' ({usage})")
    if not rest:
        raise ValueError(f"no exit code after '->' ({usage})")
    code = _exit_code(rest[0])
    middle, delay_ns = rest[1:], 0
    if len(middle) >= 2 and middle[-2] == "after":
        delay_ns = parse_duration(middle[-1])
        middle = middle[:-2]
    if len(middle) > 1:
        raise ValueError(f"too many words after the exit code: {shlex.join(middle)} ({usage})")
    stdout = middle[0].encode() if middle else b""
    return ExecRule(argv, ExecResult(code, stdout=stdout, delay_ns=delay_ns))


@functools.lru_cache(maxsize=256)
def parse_script(script: str) -> Behaviour:
    """Parse a behaviour script (see the module docstring); raise :class:`ScriptError`. Memoized: the
    result is immutable, and every container of a pod template carries the same annotation."""
    builder = _Builder()
    for number, clause in enumerate(split_clauses(script), start=1):
        try:
            tokens = shlex.split(clause)
            if tokens:
                builder.clause(tokens)
        except ValueError as err:
            raise ScriptError(f"clause {number} {clause.strip()!r}: {err}") from None
    return builder.build()
