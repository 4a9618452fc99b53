"""Running one bash command for the shell capability, so that nothing it starts outlives it.

    finished, code, text = await run("make test", cwd="/work", env=env, timeout=60, limit=20000)

Where the OS allows it (Linux with util-linux's ``unshare`` and ``setpriv`` and user namespaces,
which an unprivileged user usually has, and root too), the command runs in its own user, PID and
mount namespaces, under a small init (GNU ``timeout`` with no limit) that is PID 1 there: it sees
a ``/proc`` of its own processes only — not the kernel's, so not its ``environ``, ``cmdline`` or
``mem``. Everything in the namespace runs without capabilities (an empty bounding set, none
inheritable or ambient, ``no_new_privs``), so the command cannot undo that: root there cannot
``umount /proc`` (under it lies the host's), mount another one, remount, ``nsenter`` or
``chroot``, and a user namespace it makes inside gets the mounts locked. And when bash
returns, that init exits and the kernel kills everything left in the namespace, whatever it did
to detach (``setsid``, ``nohup``, ``disown``, double forks, ``set -m``). Elsewhere the command
runs in a cgroup (v2) of its own where this process may make one, and ``cgroup.kill`` ends what
is left in it; failing that, every descendant is tracked by its session, its parent chain and a
marker in its environment, in a walk of /proc repeated until no new one appears, killing each
as it is found (``env -i setsid -f cmd`` escapes that walk).

The Python process itself is marked non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): processes of
the same (non-root) user can no longer read its memory or environment, measured here: a child
reading ``/proc/$PPID/environ`` got "Permission denied" (root still can, with CAP_SYS_PTRACE).
The price: debuggers (gdb, py-spy) need root to attach to it, and it cannot read its own
``/proc/self/environ``.

Output is read in bounded memory (a head and a tail with a margin around each cut), redacted,
and only then cut, so a secret astride a cut is redacted whole rather than shown in part.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

from ...safety import secrets

__all__ = ["run", "isolation", "isolation_kind", "protect_process", "Output"]

_TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL
_EOF_GRACE = 1.0  # how long to wait for the last output once everything is dead
_MARKER = "BETTONG_SHELL_CALL"  # in the environment of every descendant, when not isolated
# Rounds of killing what is found, and of trying to remove a cgroup the killed still hold (5 ms
# apart), before giving up: bounded, so that what keeps forking cannot hold the caller forever.
_ROUNDS = 200
# PID 1 of the namespace runs bash as its child, so that `kill $$` works as usual (the kernel
# drops signals an init has no handler for), and passes on its exit status (128+N for signal
# N); its exit ends the namespace. GNU timeout with no limit does that, and in the caller's
# process group; else a bash whose own stderr goes nowhere, or it would report "Terminated"
# (dash does even then, so not dash).
_INITS = (["timeout", "--foreground", "0", "bash", "-c"],
          ["bash", "-c", 'exec 2>/dev/null; bash -c "$1" 2>&1; exit $?', "init"])
# Run inside the namespaces, after unshare has mounted their /proc: from here on no process
# there holds a capability or can gain one (a setuid file included), so none can unmount that
# /proc and read the host's beneath it. Without setpriv there are no namespaces at all: ones the
# command could undo would only look like isolation.
_POWERLESS = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"]


# --- isolation ------------------------------------------------------------------------------------

_probe_lock = threading.Lock()
_probed: dict[str, list[str] | str | None] = {}  # "prefix": isolation(), "cgroups": _cgroups()


def isolation() -> list[str] | None:
    """The argv that runs a command (appended to it) in new namespaces here, or None. Probed
    once: user + PID + mount namespaces, or, for root where user namespaces are off, PID + mount;
    either way with every capability dropped once /proc is mounted."""
    with _probe_lock:
        if "prefix" not in _probed:
            _probed["prefix"] = _probe()
        return _probed["prefix"]


def _probe() -> list[str] | None:
    if not sys.platform.startswith("linux"):
        return None
    common = ["--pid", "--mount-proc", "--fork", "--kill-child"]
    candidates = [["unshare", "--user", f"--map-user={os.getuid()}", f"--map-group={os.getgid()}", *common]]
    if os.geteuid() == 0:
        candidates.append(["unshare", *common])
    for prefix in ([*namespaces, "--", *_POWERLESS, *init] for namespaces in candidates for init in _INITS):
        try:
            probe = subprocess.run([*prefix, "kill -TERM $$"], stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=10)
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 128 + signal.SIGTERM and not probe.stdout and not probe.stderr:
            return prefix
    return None


def isolation_kind() -> str:
    """``"namespaces"``, ``"pid namespace"`` (root without user namespaces) or ``"none"``."""
    prefix = isolation()
    return "none" if prefix is None else "namespaces" if "--user" in prefix else "pid namespace"


_protected = False


def protect_process() -> bool:
    """Mark this process non-dumpable (Linux), once; True if it is."""
    global _protected
    if not _protected and sys.platform.startswith("linux"):
        import ctypes  # only here: it costs about 8 ms to import

        try:
            _protected = ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE
        except (OSError, AttributeError):
            _protected = False
    return _protected


# --- bounded, redacted output -----------------------------------------------------------------------

def _cut_marker(cut: int) -> str:
    return f"\n... [{cut} characters truncated] ...\n"


class _Clip:
    """A string of any length kept as its first ``head_keep`` and last ``tail_keep`` characters."""

    def __init__(self, head_keep: int, tail_keep: int):
        self.head_keep, self.tail_keep = head_keep, tail_keep
        self.head, self.tail, self.total = "", "", 0

    def add(self, text: str) -> None:
        if len(self.head) < self.head_keep:
            self.head += text[: self.head_keep - len(self.head)]
        if len(text) >= self.tail_keep:
            self.tail = text[-self.tail_keep:]
        else:
            self.tail = (self.tail + text)[-self.tail_keep:]
        self.total += len(text)

    def whole(self) -> str | None:
        """All of it, when the head and tail still hold all of it."""
        if self.total <= len(self.head):
            return self.head
        if self.total <= self.head_keep + self.tail_keep:
            return self.head + self.tail[len(self.tail) - (self.total - len(self.head)):]
        return None

    def extend(self, other: _Clip) -> None:
        whole = other.whole()
        if whole is not None:
            self.add(whole)
            return
        # other's middle is gone, but its head and tail hold all this clip can still need
        self.head += other.head[: self.head_keep - len(self.head)]
        self.tail = other.tail
        self.total += other.total


def _margin() -> int:
    """Room kept beyond each cut: more than the longest spelling of any secret value (a
    value twice JSON-escaped, folded a character a line, is under 48 times its length)."""
    return max([4096, *(48 * len(v) for v in secrets.credential_values())])


class Output:
    """Trims, redacts and truncates the output as it streams in:
    ``truncate(redact(out.strip()), limit)``, read in memory bounded by ``limit`` plus margins."""

    def __init__(self, limit: int, margin: int | None = None):
        self._limit = limit
        self._margin = _margin() if margin is None else margin
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self._text = self._clip()  # everything up to the last non-whitespace character
        self._blank = self._clip()  # the whitespace after it: trimmed unless more text follows

    def _clip(self) -> _Clip:
        head = self._limit // 4
        return _Clip(head + self._margin, self._limit - head + self._margin)

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decode(data, final)
        if not self._text.total:
            text = text.lstrip()
        body = text.rstrip()
        if body:
            self._text.extend(self._blank)
            self._blank = self._clip()
            self._text.add(body)
        self._blank.add(text[len(body):])

    def value(self) -> str:
        self.feed(b"", final=True)
        clip, limit = self._text, self._limit
        head_size, tail_size = limit // 4, limit - limit // 4
        whole = clip.whole()
        if whole is not None:
            head_text = tail_text = whole
            head_spans = tail_spans = secrets.redaction_spans(whole)
            redacted = _splice(whole, head_spans, 0, len(whole))
            if len(redacted) <= limit:
                return redacted
        else:  # only the ends are kept, each with a margin beyond its cut
            head_text, tail_text = clip.head, clip.tail
            head_spans, tail_spans = secrets.redaction_spans(head_text), secrets.redaction_spans(tail_text)
        # Cut where no secret is astride the cut: a redacted stretch is shown whole or not at all.
        head_cut = next((end for start, end in head_spans if start < head_size < end), head_size)
        tail_cut = len(tail_text) - tail_size
        tail_cut = next((start for start, end in tail_spans if start < tail_cut < end), tail_cut)
        if whole is not None and head_cut >= tail_cut:
            return redacted
        head = _splice(head_text, head_spans, 0, head_cut)
        tail = _splice(tail_text, tail_spans, tail_cut, len(tail_text))
        return head + _cut_marker(clip.total - head_cut - (len(tail_text) - tail_cut)) + tail


def _splice(text: str, spans: list[tuple[int, int]], start: int, end: int) -> str:
    """``text[start:end]`` with the spans inside it replaced by the redaction marker."""
    out, at = [], start
    for s, e in spans:
        if s >= start and e <= end:
            out += (text[at:s], secrets.REDACTED)
            at = e
    out.append(text[at:end])
    return "".join(out)


# --- running --------------------------------------------------------------------------------------------

class _Command(asyncio.SubprocessProtocol):
    def __init__(self, output: Output):
        loop = asyncio.get_running_loop()
        self.output = output
        self.exited = loop.create_future()
        self.closed = loop.create_future()  # stdout reached EOF: nobody holds the pipe any more

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.output.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _within(future: asyncio.Future, seconds: float) -> bool:
    done, _ = await asyncio.wait({future}, timeout=seconds)
    return bool(done)


async def run(command: str, *, cwd: str, env: dict[str, str], timeout: float, limit: int,
              isolate: bool = True) -> tuple[bool, int, str]:
    """Run ``command`` in bash; ``(finished in time, exit code as bash reports it, output)``."""
    protect_process()
    loop = asyncio.get_running_loop()
    if isolate and "prefix" not in _probed:  # the first time: probe without blocking the loop
        await loop.run_in_executor(None, isolation)
    prefix = isolation() if isolate else None
    if not prefix and "cgroups" not in _probed:
        await loop.run_in_executor(None, _cgroups)
    tracker = None if prefix else _Cgroup.make(env) or _Tracker(env)
    argv = [*prefix, command] if prefix else tracker.argv(command)
    output = Output(limit)
    try:
        transport, proc = await loop.subprocess_exec(
            lambda: _Command(output), *argv,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=cwd, env=tracker.env if tracker else env,
            start_new_session=True,  # its own process group, so one killpg reaches every child
        )
    except BaseException:
        if tracker:
            tracker.close()
        raise
    pgid = transport.get_pid()
    if tracker:
        tracker.started(pgid)
    try:
        finished = await _within(proc.exited, timeout)
        # whatever is left now is a background job or the overrunning command
        left = _signal_group(pgid, signal.SIGTERM)
        escaped = tracker is not None and tracker.signal_all(signal.SIGTERM)
        if left or escaped:  # else nothing is alive that could start anything more
            await _within(asyncio.gather(proc.exited, proc.closed), _TERM_GRACE)
            _signal_group(pgid, signal.SIGKILL)
            if tracker:
                tracker.kill_all()
        await _within(proc.closed, _EOF_GRACE)
        await _within(proc.exited, _EOF_GRACE)
    except BaseException:  # cancelled: no grace
        _signal_group(pgid, signal.SIGKILL)
        if tracker:
            tracker.kill_all()
        raise
    finally:
        transport.close()
        if tracker:
            tracker.close()
    code = transport.get_returncode()
    code = 128 - code if code is not None and code < 0 else code  # killed by signal N: 128+N
    return finished, -1 if code is None else code, output.value()


def _signal_each(pids, sig: int) -> bool:
    """Signal each of ``pids``; False if none was alive."""
    found = False
    for pid in pids:
        try:
            os.kill(pid, sig)
            found = True
        except ProcessLookupError:
            pass
    return found


def _kill_until_none(signal_all) -> None:
    """SIGKILL what ``signal_all`` finds, again and again, until one round finds none alive."""
    for _ in range(_ROUNDS):
        if not signal_all(signal.SIGKILL):
            return


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when nothing is left in it."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


class _Cgroup:
    """Every descendant of one command without namespaces, where this process may make a cgroup
    (v2) below its own: the command starts in a cgroup of its own, and whatever it does to detach
    (``env -i``, ``setsid``, double forks, reparenting to init) its processes stay in it, until
    one write to ``cgroup.kill`` ends them all. Only a process allowed to write to another
    cgroup's ``cgroup.procs`` (root, mostly) can leave it."""

    def __init__(self, path: str, env: dict[str, str]):
        self.path = path
        self.env = env

    @classmethod
    def make(cls, env: dict[str, str]) -> _Cgroup | None:
        base = _cgroups()
        if base is None:
            return None
        try:
            return cls(_new_cgroup(base), env)
        except OSError:
            return None

    def argv(self, command: str) -> list[str]:
        # bash moves itself in (writing 0 moves the writer) before it runs anything, then
        # becomes the command's bash; a command that cannot be moved does not run
        return ["bash", "-c", 'echo 0 > "$0" && exec bash -c "$1"', os.path.join(self.path, "cgroup.procs"), command]

    def started(self, pid: int) -> None:
        pass

    def signal_all(self, sig: int) -> bool:
        return _signal_each(self._pids(), sig)

    def kill_all(self) -> None:
        try:
            with open(os.path.join(self.path, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:  # before Linux 5.14
            _kill_until_none(self.signal_all)

    def close(self) -> None:
        """Kill whatever is left in the cgroup, and remove it once the kernel has emptied it."""
        self.kill_all()
        for _ in range(_ROUNDS):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:  # still populated: the killed are not reaped yet
                time.sleep(0.005)

    def _pids(self) -> list[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(line) for line in f if line.strip()]
        except (OSError, ValueError):
            return []


def _new_cgroup(base: str, kind: str = "") -> str:
    """Make a cgroup below ``base``, named for this process and unique; its path. Raises OSError."""
    path = os.path.join(base, f"bettong-shell-{kind}{os.getpid()}-{uuid.uuid4().hex[:12]}")
    os.mkdir(path)
    return path


def _cgroups() -> str | None:
    """This process's cgroup v2 directory when it may make cgroups there and move processes
    into them (a probe does both, once), else None."""
    with _probe_lock:
        if "cgroups" not in _probed:
            _probed["cgroups"] = _probe_cgroups()
        return _probed["cgroups"]


def _probe_cgroups() -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open("/proc/self/cgroup") as f:
            own = next(line.split(":", 2)[2].strip() for line in f if line.startswith("0::"))
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f if " - cgroup2 " in line]
    except (OSError, StopIteration, IndexError):
        return None
    for fields in mounts:
        root, where = fields[3], fields[4]
        if own == root or own.startswith(root.rstrip("/") + "/"):
            base = os.path.join(where, own[len(root):].lstrip("/"))
            try:
                probe = _Cgroup(_new_cgroup(base, "probe-"), {})
            except OSError:
                continue
            try:
                moved = subprocess.run(probe.argv("true"), stdin=subprocess.DEVNULL, capture_output=True,
                                       timeout=10).returncode == 0
            except (OSError, subprocess.SubprocessError):
                moved = False
            probe.close()
            if moved:
                return base
    return None


class _Tracker:
    """Every descendant of one command without namespaces or a cgroup: by session, by parent,
    and by a marker in the environment, which survives ``setsid`` and the death of the parent.
    What it cannot find: a process that both clears its environment (``env -i``) and leaves the
    session and the parent chain (``setsid -f``, a double fork with ``setsid``) before a walk
    sees it."""

    def __init__(self, env: dict[str, str]):
        self.token = uuid.uuid4().hex
        self.env = {**env, _MARKER: self.token}
        self.needle = f"{_MARKER}={self.token}".encode()
        self.sid = 0
        self.since = 0
        self.first_pid = 0
        self.family: set[int] = set()

    @staticmethod
    def argv(command: str) -> list[str]:
        return ["bash", "-c", command]

    def close(self) -> None:
        """Nothing to release: what is alive was killed."""

    def started(self, pid: int) -> None:
        self.sid = pid
        self.family.add(pid)
        self.since = _start_time(pid) or 0
        self.first_pid = pid

    def kill_all(self) -> None:
        """Walk /proc, killing each member as it is found, until a walk finds none alive."""
        _kill_until_none(self.signal_all)

    def signal_all(self, sig: int) -> bool:
        """One walk of /proc, signalling every live member as it is found; False if there was none."""
        return _signal_each(self._members(), sig)

    def _members(self):
        for pid, ppid, session, state in _processes(self.since, self.first_pid):
            if pid == os.getpid() or state in "ZX":
                continue
            if session == self.sid or ppid in self.family or pid in self.family or self._marked(pid):
                self.family.add(pid)
                yield pid

    def _marked(self, pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                return self.needle in f.read()
        except OSError:
            return False


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _processes(since: int, first_pid: int):
    """``(pid, ppid, session, state)`` of the processes started at or after ``since`` (clock
    ticks after boot) by ``first_pid`` or later: pids grow until they wrap around, so unless
    the last one given out is below ``first_pid`` only the pids from it up need reading."""
    try:
        names = os.listdir("/proc")
        with open("/proc/sys/kernel/ns_last_pid") as f:
            lowest = first_pid if int(f.read()) >= first_pid else 0
    except (OSError, ValueError):
        return
    for name in names:
        if not name.isdigit() or int(name) < lowest:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[19]) >= since:
            yield int(name), int(fields[1]), int(fields[3]), fields[0].decode()
