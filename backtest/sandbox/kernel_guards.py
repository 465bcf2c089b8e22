"""Kernel-level guards of a sandboxed child: privileges, a private tmpfs, Landlock, seccomp.

Why a module of its own: these are the guards that hold when the Python-level ones are
bypassed (``ctypes`` straight to libc), so each one is small, explicit and checked.

Order in the child (``backtest.sandbox.child``): ``private_tmpfs`` and ``shared_to_private``
while still root, then ``drop_privileges`` (an unprivileged uid of its own, no groups, no
capabilities, ``no_new_privs``), then ``landlock`` and ``seccomp``. Everything here is Linux
x86-64 / aarch64 only and degrades to a no-op elsewhere, except ``drop_privileges`` when
running as root, which fails closed: a child that cannot drop root never runs the job.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from typing import Any

_libc_handle: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL | None:
    """libc with errno, loaded once per process (the warm worker loads it before forking)."""
    global _libc_handle
    if _libc_handle is None and sys.platform.startswith("linux"):
        try:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.syscall.restype = ctypes.c_long
            lib.prctl.restype = ctypes.c_int
            lib.mmap.restype = ctypes.c_void_p
            lib.mmap.argtypes = [
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_long,
            ]
            _libc_handle = lib
        except OSError:
            return None
    return _libc_handle


def _check(ok: bool, what: str) -> None:
    if not ok:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


# ---------------------------------------------------------------------------- privileges

# Each child gets a uid/gid of its own from this range (no passwd entry): children can't
# signal or trace each other or any host account, and RLIMIT_NPROC counts one child only.
SANDBOX_UID_BASE = 0x7E000000  # + pid; Linux pids stay below 2**22

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_READ = 23
_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# NOROOT + locked, NO_SETUID_FIXUP locked off, KEEP_CAPS locked off, NO_CAP_AMBIENT_RAISE + locked
_SECUREBITS = (1 << 0) | (1 << 1) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7)
_CAP_VERSION_3 = 0x20080522
_SYS_CAPGET, _SYS_CAPSET = 125, 126


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def sandbox_uid(pid: int) -> int:
    """The uid a sandboxed job runs as: one per pid, so no two jobs share one."""
    return SANDBOX_UID_BASE + pid


def _cap_last() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", "rb") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63


def capabilities() -> tuple[int, int, int]:
    """(effective, permitted, inheritable) capability masks of this process."""
    lib = libc()
    if lib is None:
        return (0, 0, 0)
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    _check(lib.syscall(_SYS_CAPGET, ctypes.byref(header), data) == 0, "capget")
    low, high = data[0], data[1]
    return (
        low.effective | high.effective << 32,
        low.permitted | high.permitted << 32,
        low.inheritable | high.inheritable << 32,
    )


def bounding_set() -> list[int]:
    """Capabilities still in this process's bounding set."""
    lib = libc()
    if lib is None:
        return []
    return [c for c in range(_cap_last() + 1) if lib.prctl(_PR_CAPBSET_READ, c, 0, 0, 0) == 1]


def drop_privileges(uid: int) -> None:
    """Become ``uid``/``uid`` with no groups, no capabilities (every set) and no_new_privs.

    As root this fails closed (``OSError``) unless every step is verified; as another
    user the uid stays and only the capability sets are cleared. Afterwards the process
    cannot regain privileges: exec is refused by seccomp, setuid binaries are powerless
    under no_new_privs and the securebits are locked.
    """
    lib = libc()
    if lib is None:
        return
    root = os.geteuid() == 0
    if root:
        _check(lib.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0) == 0, "securebits")
        for cap in range(_cap_last() + 1):
            _check(lib.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0, f"drop capability {cap}")
    lib.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if root:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()  # all zero
    _check(lib.syscall(_SYS_CAPSET, ctypes.byref(header), data) == 0, "capset")
    _check(lib.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs")
    lib.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # /proc/self/* stays root-owned
    if root and (
        os.getresuid() != (uid, uid, uid)
        or os.getresgid() != (uid, uid, uid)
        or os.getgroups()
        or any(capabilities())
        or bounding_set()
    ):
        raise OSError("drop_privileges: the child still holds privileges after the drop")


def die_with_parent(parent: int) -> None:
    """SIGKILL when the parent exits (set after the uid change, which clears it)."""
    lib = libc()
    if lib is None:
        return
    lib.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
    if os.getppid() != parent:  # the parent is already gone
        os._exit(1)


# ---------------------------------------------------------------------------- memory, tmpfs

_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
_PROT_RW, _MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS = 3, 0x02, 0x10, 0x20


def private_tmpfs(path: str, *, size_mb: int, inodes: int, uid: int) -> bool:
    """Mount a size- and inode-capped tmpfs on ``path``, visible to this process only.

    Why: ``RLIMIT_FSIZE`` caps one file; only a filesystem of its own caps the total a
    job may write, and a tmpfs in a private mount namespace vanishes with the child (the
    parent sees, and removes, an empty directory). Needs root; False when unavailable
    (the parent then measures the directory after the job).
    """
    lib = libc()
    if lib is None or os.geteuid() != 0 or lib.unshare(_CLONE_NEWNS) != 0:
        return False
    # From here on a failure must stop the job: a mount would otherwise propagate to the host.
    _check(lib.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) == 0, "private mounts")
    opts = f"size={size_mb}m,nr_inodes={inodes},mode=0700,uid={uid},gid={uid}".encode()
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _check(lib.mount(b"tmpfs", os.fsencode(path), b"tmpfs", flags, opts) == 0, "mount tmpfs")
    return True


SEMAPHORES = "/dev/shm/sem."  # multiprocessing's POSIX semaphores
# The folder name the process pool publishes a run's whole frames under
# (backtest.executors.pool_frames): mapped by the worker, never the child's.
FRAMES_DIR_PREFIX = "bt-frames-"


def host_mapping(path: str) -> bool:
    """Whether a shared mapping of ``path`` is the host's, not the child's: a semaphore of the
    worker's queues, or a frame file the pool published (whole bars, holdout included)."""
    return path.startswith(SEMAPHORES) or f"/{FRAMES_DIR_PREFIX}" in path


def shared_to_private() -> int:
    """Replace this process's shared mappings of the host's files (``host_mapping``) with
    private zero pages.

    A forked child inherits its worker's multiprocessing locks (the pool's queues) as
    shared memory: taking one, found on the stack, jammed the worker for good. After this
    the child's lock objects point at its own copy. It also inherits the pool's published
    frames, mapped by its worker: whole histories, the sealed holdout included. The child is
    fed only a fresh copy of its window, so it needs none of them, and after this no address
    of its own holds them. Returns the number of mappings replaced.
    """
    lib = libc()
    if lib is None:
        return 0
    try:
        with open("/proc/self/maps", "rb") as fh:
            maps = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return 0
    replaced = 0
    for line in maps:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or fields[1][3:4] != "s" or not host_mapping(fields[5]):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        flags = _MAP_PRIVATE | _MAP_FIXED | _MAP_ANONYMOUS
        got = lib.mmap(start, end - start, _PROT_RW, flags, -1, 0)
        _check(got == start, f"remap a shared mapping of {fields[5]}")
        replaced += 1
    return replaced


# ---------------------------------------------------------------------------- landlock

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_O_PATH = getattr(os, "O_PATH", 0o10000000)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when unavailable."""
    lib = libc()
    if lib is None or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    abi = lib.syscall(
        _SYS_LANDLOCK_CREATE_RULESET,
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return max(0, int(abi))


def _fs_access(abi: int) -> int:
    """Every filesystem access right the kernel's Landlock ABI knows."""
    fs_all = (1 << 13) - 1
    if abi >= 2:
        fs_all |= 1 << 13  # REFER
    if abi >= 3:
        fs_all |= 1 << 14  # TRUNCATE
    if abi >= 5:
        fs_all |= 1 << 15  # IOCTL_DEV
    return fs_all


def _ruleset(read_roots: tuple[str, ...], folder: str, *, net: bool) -> int:
    """A Landlock ruleset: read-only ``read_roots``, read-write ``folder``, nothing else;
    scoped signals and abstract unix sockets (ABI >= 6); no TCP when ``net``. -1 when the
    kernel has no Landlock; raises when it has one and the ruleset cannot be made."""
    lib = libc()
    abi = landlock_abi()
    if lib is None or abi < 1:
        return -1
    fs_all = _fs_access(abi)
    attr = _RulesetAttr(handled_access_fs=fs_all)
    size = 8
    if abi >= 4 and net:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
    if abi >= 4:
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
        size = 24
    ruleset = lib.syscall(
        _SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    _check(ruleset >= 0, "landlock_create_ruleset")
    ruleset = int(ruleset)
    try:
        read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
        for path, access in [*((root, read) for root in read_roots), (folder, fs_all)]:
            try:
                fd = os.open(path, _O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneath(allowed_access=access, parent_fd=fd)
                lib.syscall(
                    _SYS_LANDLOCK_ADD_RULE,
                    ctypes.c_int(ruleset),
                    ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                    ctypes.byref(rule),
                    ctypes.c_uint32(0),
                )
            finally:
                os.close(fd)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def _restrict(ruleset: int, what: str) -> None:
    """Enforce ``ruleset`` on this process (a new, nested domain); closes it."""
    try:
        lib = libc()
        restricted = (
            lib is not None
            and lib.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), 0) == 0
        )
        _check(restricted, what)
    finally:
        os.close(ruleset)


def landlock(read_roots: tuple[str, ...], tmpdir: str) -> None:
    """Read-only ``read_roots``, read-write ``tmpdir``, nothing else; no TCP; scoped signals."""
    ruleset = _ruleset(read_roots, tmpdir, net=True)
    if ruleset >= 0:
        _restrict(ruleset, "landlock_restrict_self")


def job_ruleset(read_roots: tuple[str, ...], folder: str) -> int:
    """The Landlock ruleset of one job process of a batch child: read-only ``read_roots``,
    read-write only ``folder`` (the job's own subfolder of the batch's temp dir), scoped
    signals and abstract unix sockets (ABI >= 6). -1 when the kernel has no Landlock.

    Made by the batch child before the job's fork, while the previous job runs: the job
    process only restricts itself with it (``job_landlock``), one syscall. A nested domain
    keeps every rule of the batch child's (domains only intersect): the job reaches its own
    folder and nothing of the other jobs' (not their folders, not the temp dir itself), and
    cannot signal the batch child or its siblings, which are outside its domain."""
    return _ruleset(read_roots, folder, net=False)


def job_landlock(ruleset: int) -> None:
    """Enforce a job's ``ruleset`` (from ``job_ruleset``) on this process; closes it. A
    negative ``ruleset`` (no Landlock on this kernel) does nothing."""
    if ruleset >= 0:
        _restrict(ruleset, "landlock_restrict_self (job)")


# ---------------------------------------------------------------------------- seccomp

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_CLONE_THREAD = 0x00010000
_EPERM, _ENOSYS = 1, 38
# x86-64 syscall numbers refused outright (EPERM), by what they would let a job do.
BLOCKED_SYSCALLS = {
    # processes, other processes' memory, namespaces, sessions
    "fork": 57,
    "vfork": 58,
    "execve": 59,
    "execveat": 322,
    "ptrace": 101,
    "setsid": 112,
    "unshare": 272,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "personality": 135,
    # network, kernel attack surface
    "socket": 41,
    "socketpair": 53,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "perf_event_open": 298,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "fanotify_init": 300,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    # identity and capabilities (already dropped: these could only fail or lower them)
    "setuid": 105,
    "setgid": 106,
    "setreuid": 113,
    "setregid": 114,
    "setgroups": 116,
    "setresuid": 117,
    "setresgid": 119,
    "setfsuid": 122,
    "setfsgid": 123,
    "capset": 126,
    # file metadata: seccomp cannot see paths, so none at all (the temp dir needs none)
    "chmod": 90,
    "fchmod": 91,
    "fchmodat": 268,
    "fchmodat2": 452,
    "chown": 92,
    "fchown": 93,
    "lchown": 94,
    "fchownat": 260,
    "utime": 132,
    "utimes": 235,
    "futimesat": 261,
    "utimensat": 280,
    "setxattr": 188,
    "lsetxattr": 189,
    "fsetxattr": 190,
    "removexattr": 197,
    "lremovexattr": 198,
    "fremovexattr": 199,
    "setxattrat": 463,
    "removexattrat": 466,
    "file_setattr": 469,
    "mknod": 133,
    "mknodat": 259,
    # scheduling priority (setpriority is checked by value below)
    "sched_setparam": 142,
    "sched_setscheduler": 144,
    "sched_setattr": 314,
    "ioprio_set": 251,
    # the machine: mounts, reboot, modules, clocks, names, swap, accounting, raw I/O
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "open_tree_attr": 467,
    "reboot": 169,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "settimeofday": 164,
    "clock_settime": 227,
    "adjtimex": 159,
    "clock_adjtime": 305,
    "sethostname": 170,
    "setdomainname": 171,
    "swapon": 167,
    "swapoff": 168,
    "acct": 163,
    "syslog": 103,
    "vhangup": 153,
    "quotactl": 179,
    "iopl": 172,
    "ioperm": 173,
    # System V IPC and POSIX message queues outlive the job
    "shmget": 29,
    "semget": 64,
    "msgget": 68,
    "mq_open": 240,
    # memory no rlimit counts (a memfd's pages are in no address space), and file locks: a
    # lock on a readable file is a channel between children and jams host writers (SQLite)
    "memfd_create": 319,
    "memfd_secret": 447,
    "flock": 73,
}
_PROCESS_SYSCALLS = ("fork", "vfork")  # allowed in a batch child (it forks one per job)
_SYS_CLONE, _SYS_CLONE3, _SYS_IOCTL, _SYS_SETPRIORITY, _SYS_FCNTL = 56, 435, 16, 141, 72
_SYS_SETPGID = 109
# ioctl requests refused on any descriptor: typing into a terminal, console tricks.
BLOCKED_IOCTLS = {"TIOCSTI": 0x5412, "TIOCLINUX": 0x541C, "TIOCCONS": 0x541D}
# fcntl commands refused: record locks (POSIX and open-file-description, set and probe),
# leases and directory notifications (each one a channel through a shared file).
BLOCKED_FCNTLS = {
    "F_GETLK": 5,
    "F_SETLK": 6,
    "F_SETLKW": 7,
    "F_OFD_GETLK": 36,
    "F_OFD_SETLK": 37,
    "F_OFD_SETLKW": 38,
    "F_SETLEASE": 1024,
    "F_NOTIFY": 1026,
}
# clone flags that make namespaces: refused even where processes are allowed
_CLONE_NEW_ANY = 0x7E020000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def _refuse_arg(nr: int, offset: int, values: list[int]) -> list[tuple[int, int, int, int]]:
    """Syscall ``nr`` refused when the 32-bit argument at ``offset`` is one of ``values``."""
    ld_abs, jeq, ret = 0x20, 0x15, 0x06
    prog = [_bpf(jeq, nr, jf=len(values) + 3), _bpf(ld_abs, offset)]
    for i, value in enumerate(values):
        prog.append(_bpf(jeq, value, jt=len(values) - i))
    return [*prog, _bpf(ret, 0x7FFF0000), _bpf(ret, 0x00050000 | _EPERM)]


def seccomp_program(*, processes: bool = False) -> list[tuple[int, int, int, int]]:
    """The classic-BPF seccomp filter (x86-64) as (code, jt, jf, k) tuples.

    Arguments are read as their low 32 bits (``seccomp_data.args[i]`` at ``16 + 8 i``):
    the kernel truncates ioctl's request and setpriority's value to 32 bits too.
    ``processes=True`` is the batch child's filter: it may fork (no namespaces), because it
    runs each job in a process of its own, which adds the full filter before the job runs.
    """
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | _EPERM
    prog = [
        _bpf(ld_abs, 4),  # seccomp_data.arch
        _bpf(jeq, _AUDIT_ARCH_X86_64, jt=1),
        _bpf(ret, deny),  # i386 (int 0x80) and any other ABI
        _bpf(ld_abs, 0),  # seccomp_data.nr
        _bpf(jge, _X32_SYSCALL_BIT, jf=1),
        _bpf(ret, deny),
    ]
    allowed = _PROCESS_SYSCALLS if processes else ()
    for nr in sorted(v for k, v in BLOCKED_SYSCALLS.items() if k not in allowed):
        prog += [_bpf(jeq, nr, jf=1), _bpf(ret, deny)]
    prog += _refuse_arg(_SYS_IOCTL, 24, sorted(BLOCKED_IOCTLS.values()))  # args[1]: request
    prog += _refuse_arg(_SYS_FCNTL, 24, sorted(BLOCKED_FCNTLS.values()))  # args[1]: command
    prog += [
        _bpf(jeq, _SYS_SETPRIORITY, jf=4),
        _bpf(ld_abs, 32),  # args[2]: the nice value; negative (more priority) is refused
        _bpf(jset, 0x80000000, jf=1),
        _bpf(ret, deny),
        _bpf(ret, allow),
        _bpf(jeq, _SYS_CLONE3, jf=1),
        _bpf(ret, 0x00050000 | _ENOSYS),  # glibc falls back to clone(), checked below
        _bpf(jeq, _SYS_CLONE, jf=6),
        _bpf(ld_abs, 16),  # low half of args[0]: the clone flags
        _bpf(jset, _CLONE_NEW_ANY, jt=3),  # a namespace: refused
        _bpf(jset, _CLONE_THREAD, jt=1),
        _bpf(ret, allow if processes else deny),  # a process
        _bpf(ret, allow),  # a thread
        _bpf(ret, deny),
        _bpf(ret, allow),
    ]
    return prog


def job_seccomp_program() -> list[tuple[int, int, int, int]]:
    """What a job process of a batch child adds to the batch child's filter
    (``seccomp_program(processes=True)``, which it inherits): no processes (``fork``,
    ``vfork``, ``clone`` without ``CLONE_THREAD``) and no ``setpgid``: a job's process
    stays in the batch child's process group, which the parent kills whole (a process that
    made a group of its own outlived the batch). Stacked filters all run and the most
    restrictive answer wins, so the two together decide every syscall as
    ``seccomp_program()`` does (plus ``setpgid``); this one is a few instructions per
    syscall, not the full filter twice."""
    ld_abs, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | _EPERM
    return [
        _bpf(ld_abs, 4),  # seccomp_data.arch
        _bpf(jeq, _AUDIT_ARCH_X86_64, jt=1),
        _bpf(ret, deny),
        _bpf(ld_abs, 0),  # seccomp_data.nr (x32 numbers are refused by the batch filter)
        _bpf(jeq, BLOCKED_SYSCALLS["fork"], jt=6),
        _bpf(jeq, BLOCKED_SYSCALLS["vfork"], jt=5),
        _bpf(jeq, _SYS_SETPGID, jt=4),
        _bpf(jeq, _SYS_CLONE, jf=2),
        _bpf(ld_abs, 16),  # low half of args[0]: the clone flags
        _bpf(jset, _CLONE_THREAD, jf=1),
        _bpf(ret, allow),  # a thread (or not clone): the batch filter decides
        _bpf(ret, deny),  # a process
    ]


class PreparedFilter:
    """A seccomp program turned into the kernel's structure ahead of time (before a fork),
    so installing it in the forked process is one ``prctl``."""

    def __init__(self, prog: list[tuple[int, int, int, int]]) -> None:
        self.filters = (_SockFilter * len(prog))(
            *[_SockFilter(c, jt, jf, k) for c, jt, jf, k in prog]
        )
        self.fprog = _SockFprog(len(prog), self.filters)

    def install(self) -> None:
        """Install the filter in this process (x86-64 Linux only; elsewhere a no-op)."""
        lib = libc()
        if lib is None or platform.machine() != "x86_64":
            return
        ok = lib.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self.fprog), 0, 0) == 0
        _check(ok, "seccomp filter (job)")


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp(*, processes: bool = False) -> None:
    """Install ``seccomp_program`` (needs no_new_privs, set by ``drop_privileges``). Filters
    stack: a process that installed ``processes=True`` can add the full one later."""
    lib = libc()
    if lib is None or platform.machine() != "x86_64":
        return
    prog = seccomp_program(processes=processes)
    filters = (_SockFilter * len(prog))(*[_SockFilter(c, jt, jf, k) for c, jt, jf, k in prog])
    fprog = _SockFprog(len(prog), filters)
    installed = lib.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0
    _check(installed, "seccomp filter")


def kernel_capabilities() -> dict[str, Any]:
    """Which kernel guards the sandbox can apply on this machine."""
    return {
        "landlock_abi": landlock_abi(),
        "seccomp": libc() is not None and platform.machine() == "x86_64",
        "drop_root": libc() is not None and os.geteuid() == 0,
        "private_tmpfs": libc() is not None and os.geteuid() == 0,
    }
