"""The seatbelt: the shell capability's default refusals, as checks on what a command runs.

    reading = read("sudo rm -rf /usr/../usr", cwd="/work", home="/root")
    refused(reading)            # 'recursive delete of /'

Each rule reads the calls of a :class:`~._shell_reading.Reading` — the programs a command line
runs, with their arguments — not the text, so spacing, quoting, wrappers (``sudo``, ``env``,
``xargs``, ``find -exec``, ``bash -c``, …) and argument order do not hide a catastrophic command.
Paths are normalised (``/usr/../usr``, ``//``, ``/./``, ``/proc/self/root/usr``), relative
paths are taken from the directory the command runs in, ``~``, ``$HOME`` (with bash's operators:
``${HOME%/*}``) and brace expansions are expanded, and a glob counts when it could name a
protected directory (``/*``, ``/?*``, ``/u*``) or everything in one (``~/*``, ``/etc/*``,
``/*/*``). A word a rule cannot read (:class:`~._shell_reading.Unreadable`) breaks the rule.
"""

from __future__ import annotations

import re
from typing import Callable

from .bash import Compound, Function, Script
from .reading import (DOWNLOADERS, Call, Reading, Unreadable, escape, everything, find_actions, glob,
    gnu_args, patterns)

__all__ = ["DEFAULT_DENY", "refused", "protected", "device"]

# The top-level directories whose loss breaks the system, Linux's and macOS's.
TOP_LEVEL = frozenset({"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "opt", "proc", "root",
                       "run", "sbin", "srv", "sys", "usr", "var", "snap", "nix", "Applications", "Library", "System",
                       "Users", "Volumes", "private", "cores"})
_ANY = object()  # one path segment, any name: /home/<anyone>
_HOMES = (("home", _ANY), ("Users", _ANY))
# Under /dev, what is not a disk: writing to these is fine.
PSEUDO_DEVICES = frozenset({"null", "zero", "full", "random", "urandom", "stdin", "stdout", "stderr", "tty", "ptmx",
                            "console", "kmsg", "log", "fd", "pts", "shm", "mqueue", "tcp", "udp", "hugepages"})
_WRITES = frozenset({">", ">>", ">|", "<>", "&>", "&>>", ">&"})


# --- paths ----------------------------------------------------------------------------------------

def _matches(segment: str, name) -> bool:
    if name is _ANY:
        return True
    pattern = glob(segment)
    return pattern == name if isinstance(pattern, str) else bool(pattern.fullmatch(name))


def _segments(pattern: str, cwd: str | None) -> list[str] | None:
    """The path's segments, normalised: ``//`` and ``.`` dropped, ``..`` applied, and a
    process's view of the file system taken as the path it stands for: ``/proc/<pid>/root/usr``
    is ``/usr`` and ``/proc/self/cwd/x`` is ``x`` where the command runs. Raises Unreadable for
    a path through a directory the reader cannot name: another process's cwd, an open file
    descriptor (``/dev/fd/3/usr``, after ``exec 3< /``)."""
    if not pattern.startswith("/"):
        if cwd is None:
            return None
        pattern = escape(cwd) + "/" + pattern
    out: list[str] = []
    for segment in pattern.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out:
                out.pop()
            continue
        if _through_descriptor(out):
            raise Unreadable("a path through an open file descriptor")
        out.append(segment)
        if len(out) in (3, 5) and _matches(out[0], "proc") and (len(out) == 3 or _matches(out[2], "task")):
            if _matches(out[-1], "root"):
                out = []  # the process's root: / here, as the command shares it
            elif _matches(out[-1], "cwd"):
                if not (all(isinstance(glob(s), str) for s in out[1:-1]) and glob(out[1]) in ("self", "thread-self")
                        and cwd is not None):
                    raise Unreadable("a path through another process's working directory")
                out = _segments(escape(cwd), None)
    return out


def _through_descriptor(segments: list[str]) -> bool:
    """Do these segments name an open file descriptor, which can be a directory (``/dev/fd/3``,
    ``/dev/stdin``, ``/proc/<pid>/fd/3``)?"""
    if len(segments) == 3 and _matches(segments[0], "dev") and _matches(segments[1], "fd"):
        return True
    if len(segments) == 2 and _matches(segments[0], "dev") and any(
            _matches(segments[1], n) for n in ("stdin", "stdout", "stderr")):
        return True
    return len(segments) in (4, 6) and _matches(segments[0], "proc") and _matches(segments[-2], "fd") and (
        len(segments) == 4 or _matches(segments[2], "task"))


def protected(pattern: str, cwd: str | None, home: str) -> bool:
    """Could ``pattern`` name ``/``, a top-level system directory, a home directory, or all
    that is in one of them?"""
    segments = _segments(pattern, cwd)
    if segments is None:
        return False
    home_segments = tuple(s for s in home.split("/") if s)
    if all(isinstance(glob(s), str) for s in segments):  # a plain path, the common case
        names = tuple(glob(s) for s in segments)
        return (len(names) == 0 or (len(names) == 1 and names[0] in TOP_LEVEL) or names == home_segments
                or (len(names) == 2 and names[0] in ("home", "Users")))
    for place in ((), *((t,) for t in TOP_LEVEL), *_HOMES, home_segments):
        k = len(place)
        if len(segments) >= k and all(_matches(s, n) for s, n in zip(segments, place)) \
                and all(everything(s) for s in segments[k:]):
            return True
    return False


def device(pattern: str, cwd: str | None) -> bool:
    """Is ``pattern`` a path under /dev that is not a pseudo-device (a disk, a partition,
    /dev/disk/by-id/…, /dev/mapper/…, /dev/nvme…, /dev/mem, …)?"""
    segments = _segments(pattern, cwd)
    return bool(segments) and len(segments) >= 2 and _matches(segments[0], "dev") and not (
        isinstance(glob(segments[1]), str) and glob(segments[1]) in PSEUDO_DEVICES)


def _sysrq(pattern: str, cwd: str | None) -> bool:
    segments = _segments(pattern, cwd)
    return segments is not None and len(segments) == 2 and _matches(segments[0], "proc") \
        and _matches(segments[1], "sysrq-trigger")


def _words(call: Call, words, reading: Reading) -> list[str]:
    """The patterns ``words`` stand for; find's ``{}`` for the files it acts on."""
    out = []
    for word in words:
        if call.placeholder is not None and word.value is not None and "{}" in word.value:
            out += _words(call, call.placeholder, reading)
            continue
        out += patterns(word, cwd=call.cwd, home=reading.home) or []
    return out


def _long(option: str, full: str, shortest: int) -> bool:
    """``option`` is ``full`` or an abbreviation of it GNU accepts (at least ``shortest`` long)."""
    name = option.split("=", 1)[0]
    return len(name) >= shortest and full.startswith(name)


# --- the rules ------------------------------------------------------------------------------------

def _recursive_delete(reading: Reading) -> bool:
    for call in reading.calls:
        name, args = call.program, call.argv[1:]
        if name == "rm":
            options, operands = gnu_args(args)
            if any(_long(o, "--no-preserve-root", 3) for o in options):
                return True
            recursive = any(o in ("-r", "-R") or _long(o, "--recursive", 3) for o in options)
            if recursive and _any_protected(call, operands, reading):
                return True
        elif name in ("find", "gfind"):
            starts, actions = find_actions(args)
            if any(args[n].value == "-delete" and not narrowed for n, _, narrowed in actions) \
                    and _any_protected(call, starts, reading):
                return True
        elif name == "rsync":
            options, operands = gnu_args(args, "efT", frozenset({"--rsh", "--exclude", "--include", "--filter"}))
            if any(o.startswith("--del") for o in options) and len(operands) > 1 \
                    and _any_protected(call, operands[-1:], reading):
                return True
    return False


def _any_protected(call: Call, words, reading: Reading) -> bool:
    return any(protected(p, call.cwd, reading.home) for p in _words(call, words, reading))


_FORMATTERS = frozenset({"mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs", "wipefs", "blkdiscard"})
# Partition-table editors, and the options that make each only read: any other use on a disk
# may rewrite its partition table (sgdisk --zap-all, sfdisk < layout, parted mklabel, fdisk's
# script on stdin).
_PARTITIONERS = {
    "fdisk": frozenset({"-l", "--list", "-x", "--list-details"}),
    "sfdisk": frozenset({"-l", "--list", "-d", "--dump", "-J", "--json", "-s", "--show-size", "-V", "--verify",
                         "-F", "--list-free", "-T", "--list-types", "-g", "--show-geometry", "--show-pt-geometry"}),
    "sgdisk": frozenset({"-p", "--print", "-v", "--verify", "-i", "--info", "-L", "--list-types", "-P", "--pretend",
                         "-O", "--print-mbr"}),
    "gdisk": frozenset({"-l"}), "cfdisk": frozenset(), "cgdisk": frozenset(), "fixparts": frozenset(),
    "parted": frozenset({"-l", "--list"}), "partprobe": frozenset({"-s", "--summary", "-d", "--dry-run"}),
}


def _formatting(reading: Reading) -> bool:
    for call in reading.calls:
        name = call.program or ""
        args = call.argv[1:]
        if name == "nvme" and args and args[0].value in ("format", "sanitize"):
            args = args[1:]
        elif name in _PARTITIONERS:
            options, operands = gnu_args(args, "" if name != "sgdisk" else "abcdEfghiNnrtuxz")
            values = [w.value for w in operands]
            # parted's commands follow the device: print alone only reads
            if set(options) & _PARTITIONERS[name] or (name == "parted" and values[1:] in (["print"], ["p"])):
                continue
        elif not (name.startswith("mkfs") or name in _FORMATTERS):
            continue
        if any(device(p, call.cwd) for p in _words(call, args, reading)):
            return True
    return False


def _write_targets(call: Call, reading: Reading) -> list[str]:
    """The files ``call`` writes to by name: ``dd of=``, ``tee``, ``cp``'s destination and the like."""
    out = []
    name, args = call.program, call.argv[1:]
    if name == "dd":
        out += [p[3:] for p in _words(call, args, reading) if p.startswith("of=")]
    elif name == "tee":
        out += _words(call, gnu_args(args, "", frozenset({"--output-error"}))[1], reading)
    elif name in ("cp", "mv", "install", "rsync", "ddrescue"):
        options, operands = gnu_args(args, {"install": "gmoStZ", "rsync": "efT"}.get(name, "St"),
                                     frozenset({"--target-directory", "--suffix", "--mode", "--owner", "--group"}))
        targets = [o.split("=", 1)[1] if o.startswith("--") else o[2:] for o in options
                   if o.startswith(("-t", "--target-directory="))]
        if targets:
            out += targets
        elif len(operands) > 1:
            out += _words(call, operands[1:2] if name == "ddrescue" else operands[-1:], reading)
    elif name == "shred" or (name == "badblocks" and "-w" in gnu_args(args, "bcdeiopt")[0]):
        out += _words(call, gnu_args(args, "nsbcdeiopt", frozenset({"--iterations", "--size"}))[1], reading)
    return out


def _redirected_to(reading: Reading) -> list[tuple[str, str | None]]:
    """``(pattern, cwd)`` of every file a redirection writes, anywhere in the command."""
    out = []
    for redirect, cwd in reading.redirects:
        target = redirect.target
        if redirect.op in _WRITES and target is not None and not (
                redirect.op == ">&" and ((target.value or "").rstrip("-").isdigit() or target.value == "-")):
            out += [(p, cwd) for p in patterns(target, cwd=cwd, home=reading.home) or []]
    return out


def _writes(reading: Reading) -> list[tuple[str, str | None]]:
    return [*_redirected_to(reading), *((p, c.cwd) for c in reading.calls for p in _write_targets(c, reading))]


def _device_write(reading: Reading) -> bool:
    return any(device(p, cwd) for p, cwd in _writes(reading))


_POWER = frozenset({"poweroff", "reboot", "halt", "kexec", "soft-reboot", "suspend", "hibernate", "hybrid-sleep",
                    "suspend-then-hibernate", "rescue", "emergency"})
_POWER_TARGETS = re.compile(r"(?:poweroff|reboot|halt|kexec|soft-reboot|runlevel[06]|rescue|emergency)(?:\.target)?")


def _shutdown(reading: Reading) -> bool:
    for call in reading.calls:
        name, args = call.program, call.argv[1:]
        if name in ("shutdown", "reboot", "poweroff", "halt"):
            return True
        if name in ("systemctl", "loginctl"):
            _, operands = gnu_args(args, "tpHMnosPs", frozenset({"--type", "--property", "--host", "--machine",
                                                               "--lines", "--output", "--signal", "--state"}))
            verbs = [w.value for w in operands]
            if verbs and (verbs[0] in _POWER or (verbs[0] in ("start", "isolate", "restart") and any(
                    v and _POWER_TARGETS.fullmatch(v) for v in verbs[1:]))):
                return True
        elif name in ("init", "telinit") and args and args[0].value in ("0", "6"):
            return True
        elif name == "kill" and _kills_everything(args):
            return True
    return any(_sysrq(p, cwd) for p, cwd in _writes(reading))


def _kills_everything(args) -> bool:
    """``kill`` aimed at process 1 (init) or -1 (every process)."""
    values = [w.value for w in args]
    if values[:1] in (["-s"], ["-n"]):
        values = values[2:]
    elif values and values[0] and values[0].startswith("-") and values[0] != "--":
        values = values[1:]  # the signal
    if values[:1] == ["--"]:
        values = values[1:]
    return any(v is not None and re.fullmatch(r"-?0*1", v) for v in values)  # -01 is -1


def _fork_bomb(reading: Reading) -> bool:
    """A function that runs itself (or a function that runs it) unconditionally in a pipeline,
    in the background or in a subshell; or an endless loop of background jobs."""
    edges: dict[str, set[str]] = {}
    forking: set[tuple[str, str]] = set()
    for call in reading.calls:
        if call.function and call.program:
            edges.setdefault(call.function, set()).add(call.program)
            if call.forks and not call.conditional:
                forking.add((call.function, call.program))
    for caller, callee in forking:
        if _reaches(edges, callee, caller):
            return True
    return any(_spawns_forever(loop, reading) for loop in reading.loops)


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo += edges.get(node, ())
    return False


def _spawns_forever(loop: Compound, reading: Reading) -> bool:
    """``while true; do cmd & done``: an endless loop that starts background jobs and never
    waits for them, sleeps or leaves."""
    if not loop.endless:
        condition = loop.bodies[0].pipelines
        if len(condition) != 1 or len(condition[0].stages) != 1:
            return False
        stage = condition[0].stages[0]
        words = [w.value for w in getattr(stage, "words", [])]
        truthy = words in (["true"], [":"], ["[", "1", "]"]) or getattr(stage, "kind", "") == "((" and \
            re.fullmatch(r"\(\(\s*1\s*\)\)", stage.words[0].text)
        if loop.kind == "until":
            truthy = words == ["false"]
        if not truthy:
            return False
    pipelines = list(_pipelines(loop.bodies[-1]))
    if not any(p.background for p in pipelines):
        return False
    names = {s.words[0].value for p in pipelines if not p.background for s in p.stages if getattr(s, "words", None)}
    return not names & {"wait", "break", "exit", "return", "sleep"}


def _pipelines(script: Script):
    for pipeline in script.pipelines:
        yield pipeline
        for stage in pipeline.stages:
            node = stage.body if isinstance(stage, Function) else stage
            if isinstance(node, Compound):
                for body in node.bodies:
                    yield from _pipelines(body)


def _download_run(reading: Reading) -> bool:
    return any((c.output_runs and c.program in DOWNLOADERS) or c.runs_download for c in reading.calls)


def _chmod_args(args) -> tuple[list[str], str | None, list]:
    """chmod's options, mode and files: ``-w`` and ``-rwx`` are modes, not options."""
    options, operands = [], []
    for n, word in enumerate(args):
        value = word.value
        if value == "--":
            operands += args[n + 1:]
            break
        if value and value.startswith("--"):
            options.append(value)
        elif value and re.fullmatch(r"-[Rcfv]+", value):
            options += [f"-{f}" for f in value[1:]]
        else:
            operands.append(word)
    if any(_long(o, "--reference", 5) for o in options):
        return options, None, operands
    mode = operands[0].value if operands else None
    return options, mode, operands[1:]


def _world_writable_mode(mode: str | None) -> bool:
    if not mode:
        return False
    if re.fullmatch(r"[0-7]{1,5}", mode):
        return bool(int(mode[-1]) & 2)
    for clause in mode.split(","):
        m = re.fullmatch(r"([ugoa]*)((?:[-+=][rwxXstugo]*)+)", clause)
        if m and set(m.group(1)) & {"o", "a"} and any(
                op in "+=" and "w" in perms for op, perms in re.findall(r"([-+=])([rwxXstugo]*)", m.group(2))):
            return True
    return False


def _world_writable(reading: Reading) -> bool:
    for call in reading.calls:
        if call.program == "chmod":
            _, mode, files = _chmod_args(call.argv[1:])
            if _world_writable_mode(mode) and _any_protected(call, files, reading):
                return True
    return False


def _recursive_owner(reading: Reading) -> bool:
    for call in reading.calls:
        name, args = call.program, call.argv[1:]
        if name == "chmod":
            options, _, files = _chmod_args(args)
        elif name in ("chown", "chgrp"):
            options, operands = gnu_args(args, "", frozenset({"--from", "--reference"}))
            files = operands if any(_long(o, "--reference", 5) for o in options) else operands[1:]
        else:
            continue
        if any(o == "-R" or _long(o, "--recursive", 5) for o in options) and _any_protected(call, files, reading):
            return True
    return False


Rule = Callable[[Reading], bool]

DEFAULT_DENY: tuple[tuple[Rule, str], ...] = (
    (_recursive_delete, "recursive delete of /"),
    (_formatting, "formatting a filesystem"),
    (_device_write, "writing straight to a device"),
    (_shutdown, "shutting the machine down"),
    (_fork_bomb, "a fork bomb"),
    (_download_run, "piping a download into a shell"),
    (_world_writable, "making / world-writable"),
    (_recursive_owner, "recursively changing the permissions or owner of /"),
)


def refused(reading: Reading) -> str | None:
    """The reason of the first default rule ``reading`` breaks, or None. A rule that meets a
    word it cannot read where it looks (what ``rm -r`` deletes, where ``dd`` writes, …) counts
    as broken: what the seatbelt cannot read is refused, never taken for "no paths"."""
    for rule, reason in DEFAULT_DENY:
        try:
            if rule(reading):
                return reason
        except Unreadable:
            return reason
    return None
