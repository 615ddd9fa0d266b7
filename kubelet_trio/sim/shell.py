"""A small shell for simulated containers: what a busybox-like image would answer to the commands that
CRI clients (critest, probes, ``kubectl exec``) run in it, without running anything.

A container has no processes, but most of what such commands print is decided by the CRI configuration
the runtime was given: the user and groups (security context, image config), the hostname and DNS
config of the sandbox, its mounts (host paths are read for real), capabilities, masked and read-only
paths, namespace options (which "processes" are visible, whose network and IPC objects). :class:`View`
holds that, :func:`run` interprets an argv against it.

The language is a subset of ``sh``: ``sh -c 'SCRIPT'`` with ``;``, ``&&``, ``||``, ``|``, ``!``,
``$(...)``, ``while LIST; do LIST; done`` and the built-ins and applets listed in ``_APPLETS``. Time is
accounted, not spent: ``sleep 2`` adds 2 s to the outcome's duration, ``sleep infinity`` (or a loop that
never ends) makes it run forever, and a loop that prints and sleeps forever is reported as output that
repeats with a period. An argv naming a program the shell does not know gives ``None`` so that callers
keep their own fallback.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence

import attrs

from kubelet_trio.sim.script import OutputLine

NS = 10**9
FOREVER_NS = 10**18  # longer than any timeout a client would give

#: Linux capabilities by number (the bounding set's bit positions).
CAPABILITIES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
]

#: containerd's default capability set (what a non-privileged container gets).
DEFAULT_CAPABILITIES = frozenset(
    [
        "CHOWN",
        "DAC_OVERRIDE",
        "FSETID",
        "FOWNER",
        "MKNOD",
        "NET_RAW",
        "SETGID",
        "SETUID",
        "SETFCAP",
        "SETPCAP",
        "NET_BIND_SERVICE",
        "SYS_CHROOT",
        "KILL",
        "AUDIT_WRITE",
    ]
)


@attrs.frozen
class Process:
    """A process another container could see (``pidof``, ``/proc/1/cmdline``)."""

    pid: int
    argv: tuple[str, ...]


@attrs.define(eq=False)
class View:
    """What a command in one container can observe (see the module docstring)."""

    hostname: str = "localhost"
    resolv_conf: str = ""
    uid: int = 0
    gid: int = 0
    groups: tuple[int, ...] = ()
    user_names: Mapping[int, str] = attrs.Factory(lambda: {0: "root"})
    capabilities: frozenset[str] = DEFAULT_CAPABILITIES
    no_new_privs: bool = False
    readonly_rootfs: bool = False
    masked_paths: tuple[str, ...] = ()
    readonly_paths: tuple[str, ...] = ()
    #: container path -> (host path, read only)
    mounts: Mapping[str, tuple[str, bool]] = attrs.Factory(dict)
    files: dict[str, str] = attrs.Factory(dict)  # the container's own writable layer
    processes: Callable[[], tuple[Process, ...]] = lambda: ()  # what its PID namespace shows
    listening: Callable[[], str] = lambda: ""  # what ``netstat -ln`` prints
    ipc: Callable[[], str] = lambda: ""  # what ``ipcs -m`` prints
    stdin: str = ""
    memory_limit: int = 0  # bytes; 0 = unlimited

    def mount_for(self, path: str) -> tuple[str, bool] | None:
        """The host path behind ``path`` if a mount covers it, and whether that mount is read-only."""
        path = os.path.normpath(path)
        for target in sorted(self.mounts, key=len, reverse=True):
            target_norm = os.path.normpath(target)
            if path == target_norm or path.startswith(target_norm.rstrip("/") + "/"):
                host, readonly = self.mounts[target]
                rest = os.path.relpath(path, target_norm)
                return (host if rest == "." else os.path.join(host, rest)), readonly
        return None

    def status(self) -> str:
        def mask(caps: frozenset[str]) -> str:
            return f"{sum(1 << i for i, name in enumerate(CAPABILITIES) if name in caps):016x}"

        caps = mask(self.capabilities)
        return (
            f"Name:\tcat\nState:\tR (running)\nUid:\t{self.uid}\t{self.uid}\t{self.uid}\t{self.uid}\n"
            f"Gid:\t{self.gid}\t{self.gid}\t{self.gid}\t{self.gid}\n"
            f"Groups:\t{' '.join(map(str, self.groups))}\n"
            f"CapInh:\t0000000000000000\nCapPrm:\t{caps}\nCapEff:\t{caps}\nCapBnd:\t{caps}\n"
            f"CapAmb:\t0000000000000000\nNoNewPrivs:\t{int(self.no_new_privs)}\nSeccomp:\t0\n"
        )

    def read(self, path: str) -> str | None:
        """A file's content, or None when it does not exist."""
        path = os.path.normpath(path if path.startswith("/") else "/" + path)
        if path in self.files:
            return self.files[path]
        mounted = self.mount_for(path)
        if mounted is not None:
            try:
                with open(mounted[0], encoding="utf-8", errors="replace") as f:
                    return f.read()
            except OSError:
                return None
        if path == "/etc/hostname":
            return self.hostname + "\n"
        if path == "/etc/resolv.conf":
            return self.resolv_conf
        if path == "/etc/hosts":
            return "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        if path in ("/proc/self/status", "/proc/thread-self/status"):
            return self.status()
        if path == "/proc/self/uid_map":
            return "         0          0 4294967295\n"
        match = re.fullmatch(r"/proc/(\d+)/cmdline", path)
        if match:
            for process in self.processes():
                if process.pid == int(match[1]):
                    return "\0".join(process.argv) + "\0"
            return None
        return None

    def listdir(self, path: str) -> list[str] | None:
        path = os.path.normpath(path if path.startswith("/") else "/" + path)
        mounted = self.mount_for(path)
        if mounted is not None:
            try:
                return sorted(os.listdir(mounted[0]))
            except OSError:
                return None
        if path == "/":
            return ["bin", "dev", "etc", "home", "proc", "root", "sys", "tmp", "usr", "var"]
        prefix = path.rstrip("/") + "/"
        own = sorted({p[len(prefix) :].split("/")[0] for p in self.files if p.startswith(prefix)})
        if own or path in ("/tmp", "/root", "/home", "/var", "/etc", "/bin", "/usr"):
            return own
        return None

    def is_readonly(self, path: str) -> bool:
        path = os.path.normpath(path if path.startswith("/") else "/" + path)
        mounted = self.mount_for(path)
        if mounted is not None:
            return mounted[1] and not _under_submount(mounted[0], self._mount_root(path))
        for ro in self.readonly_paths:
            if path == ro or path.startswith(ro.rstrip("/") + "/"):
                return True
        return self.readonly_rootfs

    def _mount_root(self, path: str) -> str:
        for target in sorted(self.mounts, key=len, reverse=True):
            norm = os.path.normpath(target)
            if path == norm or path.startswith(norm.rstrip("/") + "/"):
                return self.mounts[target][0]
        return "/"

    def is_masked(self, path: str) -> bool:
        return any(path == m or path.startswith(m.rstrip("/") + "/") for m in self.masked_paths)


def _under_submount(host_path: str, root: str) -> bool:
    """Whether a host mount point lies between a (non-recursively) read-only bind mount's root and
    ``host_path``: the submount keeps its own, writable, flags."""
    current = os.path.dirname(host_path) if not os.path.isdir(host_path) else host_path
    while len(current) > len(root) and current.startswith(root):
        if os.path.ismount(current):
            return True
        current = os.path.dirname(current)
    return False


@attrs.frozen
class Outcome:
    """What running a command did: output, exit code, how long it took (or that it never ends)."""

    stdout: str = ""
    stderr: str = ""
    code: int = 0
    elapsed_ns: int = 0
    forever: bool = False
    #: A loop that runs forever printing these lines (stdout) every ``period_ns``.
    repeat: tuple[OutputLine, ...] = ()
    period_ns: int = 0
    oom_killed: bool = False  # the memory limit ended it (exit code 137)

    def then(self, other: Outcome) -> Outcome:
        if self.forever or self.oom_killed:
            return self
        return Outcome(
            self.stdout + other.stdout,
            self.stderr + other.stderr,
            other.code,
            self.elapsed_ns + other.elapsed_ns,
            other.forever,
            other.repeat,
            other.period_ns,
            other.oom_killed,
        )


class Unknown(Exception):
    """The argv names a program this shell does not know."""


_Applet = Callable[["_Shell", list[str], str], Outcome]
_APPLETS: dict[str, _Applet] = {}


def _applet(*names: str) -> Callable[[_Applet], _Applet]:
    def register(fn: _Applet) -> _Applet:
        for name in names:
            _APPLETS[name] = fn
        return fn

    return register


def _fail(message: str, code: int = 1) -> Outcome:
    return Outcome(stderr=message + "\n", code=code)


@_applet("true", ":")
def _true(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    return Outcome()


@_applet("false")
def _false(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    return Outcome(code=1)


@_applet("echo")
def _echo(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    newline = "\n"
    if args and args[0] == "-n":
        args, newline = args[1:], ""
    return Outcome(stdout=" ".join(args) + newline)


@_applet("cat")
def _cat(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    if not args:
        return Outcome(stdout=stdin)
    out, err, code = [], [], 0
    for path in args:
        content = sh.view.read(path)
        if content is None:
            err.append(f"cat: can't open '{path}': No such file or directory\n")
            code = 1
        else:
            out.append(content)
    return Outcome(stdout="".join(out), stderr="".join(err), code=code)


@_applet("sleep")
def _sleep(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    if args == ["infinity"]:
        return Outcome(forever=True)
    try:
        return Outcome(elapsed_ns=int(float(args[0]) * NS))
    except (IndexError, ValueError):
        return _fail("sleep: invalid number")


@_applet("top", "nginx", "pause", "/pause")
def _forever(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    return Outcome(forever=True)


@_applet("nnp")
def _nnp(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    """The e2e ``nonewprivs`` image's set-uid-root program: it runs as root unless no_new_privs
    keeps the caller's uid."""
    return Outcome(stdout=f"Effective uid: {sh.view.uid if sh.view.no_new_privs else 0}\n")


_SIZE = re.compile(r"(\d+)([kKMG]?)")
_SIZE_UNITS = {"": 1, "k": 1024, "K": 1024, "M": 1024**2, "G": 1024**3}


@_applet("dd")
def _dd(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    """Copies nothing, but a block larger than the memory limit gets the process OOM-killed."""
    options = dict(a.split("=", 1) for a in args if "=" in a)
    match = _SIZE.fullmatch(options.get("bs", "512"))
    block = int(match[1]) * _SIZE_UNITS[match[2]] if match else 512
    if sh.view.memory_limit and block > sh.view.memory_limit:
        return Outcome(code=137, oom_killed=True)
    if "count" not in options:
        return Outcome(forever=True)
    return Outcome(stderr=f"{options['count']}+0 records in\n{options['count']}+0 records out\n")


@_applet("exit")
def _exit(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    raise _Exit(int(args[0]) if args else sh.last)


@_applet("hostname")
def _hostname(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    if not args:
        return Outcome(stdout=sh.view.hostname + "\n")
    if "SYS_ADMIN" not in sh.view.capabilities:
        return _fail("hostname: sethostname: Operation not permitted")
    sh.view.hostname = args[0]
    return Outcome()


@_applet("id")
def _id(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    view = sh.view
    flags = "".join(a.lstrip("-") for a in args if a.startswith("-"))
    names = "n" in flags

    def show(value: int) -> str:
        return view.user_names.get(value, str(value)) if names else str(value)

    if "u" in flags:
        return Outcome(stdout=show(view.uid) + "\n")
    if "g" in flags:
        return Outcome(stdout=str(view.gid) + "\n")
    groups = [view.gid, *(g for g in view.groups if g != view.gid)]
    if "G" in flags:
        return Outcome(stdout=" ".join(map(str, groups)) + "\n")
    user = view.user_names.get(view.uid)
    uid = f"uid={view.uid}" + (f"({user})" if user else "")
    return Outcome(stdout=f"{uid} gid={view.gid} groups={','.join(map(str, groups))}\n")


@_applet("ls")
def _ls(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    paths = [a for a in args if not a.startswith("-")] or ["."]
    out, code = [], 0
    for path in paths:
        entries = sh.view.listdir("/" if path == "." else path)
        if entries is None:
            if sh.view.read(path) is not None:
                out.append(path + "\n")
                continue
            return _fail(f"ls: {path}: No such file or directory")
        out.extend(e + "\n" for e in entries)
    return Outcome(stdout="".join(out), code=code)


@_applet("touch")
def _touch(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    for path in args:
        if sh.view.is_readonly(path):
            return _fail(f"touch: {path}: Read-only file system")
        full = os.path.normpath(path if path.startswith("/") else "/" + path)
        mounted = sh.view.mount_for(full)
        if mounted is not None:
            try:
                with open(mounted[0], "a"):
                    pass
            except OSError as err:
                return _fail(f"touch: {path}: {err.strerror}")
        else:
            sh.view.files.setdefault(full, "")
    return Outcome()


@_applet("[", "test")
def _test(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    if args and args[-1] == "]":
        args = args[:-1]
    negate = bool(args) and args[0] == "!"
    if negate:
        args = args[1:]
    result = False
    if len(args) == 2 and args[0] in ("-f", "-e", "-d"):
        exists = sh.view.read(args[1]) is not None or sh.view.listdir(args[1]) is not None
        result = exists
    elif len(args) == 1:
        result = bool(args[0])
    elif len(args) == 3 and args[1] in ("=", "=="):
        result = args[0] == args[2]
    elif len(args) == 3 and args[1] == "!=":
        result = args[0] != args[2]
    return Outcome(code=0 if result != negate else 1)


@_applet("grep")
def _grep(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return _fail("grep: no pattern", 2)
    pattern, files = words[0], words[1:]
    text = stdin
    if files:
        text = "".join(sh.view.read(f) or "" for f in files)
    lines = text.replace("\0", " ").splitlines()
    found = [line for line in lines if pattern in line]
    return Outcome(stdout="".join(line + "\n" for line in found), code=0 if found else 1)


@_applet("pidof", "pgrep")
def _pidof(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    names = {a for a in args if not a.startswith("-")}
    pids = [
        str(p.pid)
        for p in sh.view.processes()
        if p.argv and (os.path.basename(p.argv[0]).split(":")[0] in names)
    ]
    if not pids:
        return Outcome(code=1)
    sep = " " if args and args[0] != "-f" and sh.argv0 == "pidof" else "\n"
    return Outcome(stdout=sep.join(pids) + "\n")


@_applet("ping")
def _ping(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    host = args[-1] if args else ""
    header = f"PING {host} ({host}): 56 data bytes\n"
    if "NET_RAW" not in sh.view.capabilities:
        return Outcome(stdout=header, stderr="ping: permission denied (are you root?)\n", code=1)
    return Outcome(stdout=header, forever=True)


@_applet("brctl")
def _brctl(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    if "NET_ADMIN" not in sh.view.capabilities:
        return _fail(f"add bridge failed: Operation not permitted: {args[-1] if args else ''}")
    return Outcome()


@_applet("netstat")
def _netstat(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    return Outcome(stdout=sh.view.listening())


@_applet("ipcs")
def _ipcs(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    return Outcome(stdout=sh.view.ipc())


@_applet("sh", "/bin/sh", "bash", "/bin/bash")
def _sh(sh: _Shell, args: list[str], stdin: str) -> Outcome:
    if len(args) >= 2 and args[0] == "-c":
        return _Shell(sh.view).script(args[1])
    if not args:  # an interactive shell: reads commands from stdin
        return _Shell(sh.view).script(stdin)
    content = sh.view.read(args[0])
    if content is None:
        return _fail(f"sh: can't open '{args[0]}': No such file or directory", 2)
    return _Shell(sh.view).script(content)


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


_SUBST = re.compile(r"\$\(([^()]*)\)")
_OPERATORS = {";", "&&", "||", "|", "\n", "&"}


@attrs.define
class _Shell:
    view: View
    last: int = 0
    argv0: str = ""

    def command(self, argv: Sequence[str], stdin: str = "") -> Outcome:
        """Run one simple command."""
        if not argv:
            return Outcome()
        name, args = argv[0], list(argv[1:])
        base = name if name in _APPLETS else os.path.basename(name)
        if self.view.is_masked(name) or ("/" not in name and self.view.is_masked(f"/bin/{name}")):
            return _fail(f"/bin/sh: {name}: Permission denied", 126)
        applet = _APPLETS.get(base)
        if applet is None:
            raise Unknown(name)
        self.argv0 = base
        return applet(self, args, stdin)

    def script(self, text: str) -> Outcome:
        """Run a script (``sh -c``); an ``exit`` ends it with that code."""
        tokens = _tokens(_substitute(self, text))
        try:
            outcome, _ = self._list(tokens, ())
        except _Exit as done:
            return Outcome(code=done.code)
        return outcome

    # Each parser step runs what it parses: there is no separate AST.
    def _list(self, tokens: list[str], until: tuple[str, ...]) -> tuple[Outcome, list[str]]:
        outcome = Outcome()
        while tokens and tokens[0] not in until:
            if tokens[0] in (";", "\n", "&"):
                tokens = tokens[1:]
                continue
            step, tokens = self._and_or_item(tokens, run=True)
            outcome = outcome.then(step)
            self.last = outcome.code
            while not outcome.forever and tokens and tokens[0] in ("&&", "||"):
                op, tokens = tokens[0], tokens[1:]
                run = (op == "&&") == (self.last == 0)
                step, tokens = self._and_or_item(tokens, run=run)
                if run:
                    outcome = outcome.then(step)
                    self.last = outcome.code
            if outcome.forever:
                return outcome, []
        return outcome, tokens

    def _and_or_item(self, tokens: list[str], *, run: bool) -> tuple[Outcome, list[str]]:
        if tokens and tokens[0] == "while":
            return self._while(tokens[1:], run=run)
        negate = False
        if tokens and tokens[0] == "!":
            negate, tokens = True, tokens[1:]
        pipeline: list[list[str]] = [[]]
        redirections: list[list[tuple[int, str]]] = [[]]
        while tokens and tokens[0] not in _OPERATORS - {"|"} and tokens[0] not in ("do", "done"):
            redirection, tokens = _redirection(tokens)
            if redirection is not None:
                redirections[-1].append(redirection)
                continue
            if tokens[0] == "|":
                pipeline.append([])
                redirections.append([])
            else:
                pipeline[-1].append(tokens[0])
            tokens = tokens[1:]
        if not run:
            return Outcome(), tokens
        stdin, total = self.view.stdin, Outcome()
        for argv, redirected in zip(pipeline, redirections, strict=True):
            step = _redirect(self.command(argv, stdin), redirected)
            stdin = step.stdout
            total = Outcome(
                step.stdout,
                total.stderr + step.stderr,
                step.code,
                total.elapsed_ns + step.elapsed_ns,
                step.forever or total.forever,
                oom_killed=step.oom_killed or total.oom_killed,
            )
        if negate:
            total = attrs.evolve(total, code=0 if total.code else 1)
        return total, tokens

    def _while(self, tokens: list[str], *, run: bool) -> tuple[Outcome, list[str]]:
        cond_tokens = _until(tokens, "do")
        body_tokens = _until(tokens[len(cond_tokens) + 1 :], "done")
        rest = tokens[len(cond_tokens) + len(body_tokens) + 2 :]
        if not run:
            return Outcome(), rest
        total = Outcome()
        for _ in range(1000):
            cond, _ = self._list(list(cond_tokens), ())
            total = total.then(attrs.evolve(cond, code=0))
            if cond.forever:
                return total, rest
            if cond.code != 0:
                return attrs.evolve(total, code=0), rest
            body, _ = self._list(list(body_tokens), ())
            if body.forever:
                return total.then(body), rest
            if not body.stderr and body.elapsed_ns and not cond.stdout:
                # The world does not change while nobody acts: the loop repeats itself forever.
                lines = tuple(OutputLine("stdout", line) for line in body.stdout.splitlines())
                return total.then(
                    Outcome(forever=True, repeat=lines, period_ns=body.elapsed_ns + cond.elapsed_ns)
                ), rest
            total = total.then(body)
        return attrs.evolve(total, forever=True), rest


_DUP = re.compile(r"(\d?)>>?")  # ``>&2``, ``2>&1`` (the tokenizer splits off the ``&``)
_TO_FILE = re.compile(r"(\d?)>>?(.*)")  # ``>/dev/null``, ``2> /dev/null``
NULL = "/dev/null"


def _redirection(tokens: list[str]) -> tuple[tuple[int, str] | None, list[str]]:
    """The output redirection ``tokens`` start with, as (fd, target: ``"1"``, ``"2"`` or ``/dev/null``),
    and the tokens after it; ``(None, tokens)`` when they start with none."""
    dup = _DUP.fullmatch(tokens[0])
    if dup and len(tokens) >= 3 and tokens[1] == "&" and tokens[2] in ("1", "2"):
        return (int(dup[1] or 1), tokens[2]), tokens[3:]
    if match := _TO_FILE.fullmatch(tokens[0]):
        target, rest = (
            (match[2], tokens[1:]) if match[2] else (tokens[1] if len(tokens) > 1 else "", tokens[2:])
        )
        if target != NULL:  # the only file this shell can write
            raise Unknown(f">{target}")
        return (int(match[1] or 1), NULL), rest
    return None, tokens


def _redirect(outcome: Outcome, redirections: list[tuple[int, str]]) -> Outcome:
    """Apply a command's output redirections, left to right as sh does (``2>&1 >/dev/null`` sends stderr
    where stdout went before)."""
    if not redirections:
        return outcome
    fds = {1: "1", 2: "2"}  # where each of the command's descriptors writes
    for fd, target in redirections:
        fds[fd] = fds[int(target)] if target in ("1", "2") else target
    streams = {"1": "", "2": "", NULL: ""}
    streams[fds[1]] += outcome.stdout
    streams[fds[2]] += outcome.stderr
    return attrs.evolve(outcome, stdout=streams["1"], stderr=streams["2"])


def _until(tokens: list[str], word: str) -> list[str]:
    depth = 0
    for i, token in enumerate(tokens):
        if token == "while":
            depth += 1
        elif token == "done" and depth and word == "done":
            depth -= 1
        elif token == word and depth == 0:
            return tokens[:i]
    return list(tokens)


def _substitute(sh: _Shell, text: str) -> str:
    """``$(command)`` becomes the command's stdout without trailing newlines."""
    while (match := _SUBST.search(text)) is not None:
        inner = _Shell(sh.view).script(match[1])
        text = text[: match.start()] + inner.stdout.rstrip("\n") + text[match.end() :]
    return text


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text.replace("\n", " ; "), posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def run(argv: Sequence[str], view: View) -> Outcome | None:
    """Run ``argv`` (an exec's cmd, or a container's command + args) in ``view``; None when the program
    is unknown to this shell."""
    try:
        return _Shell(view).command(list(argv), view.stdin)
    except Unknown:
        return None
    except _Exit as done:
        return Outcome(code=done.code)
