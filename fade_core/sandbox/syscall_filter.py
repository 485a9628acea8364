"""The seccomp filter every sandboxed program runs under: a classic-BPF deny list, built here.

Built by hand (about 200 BPF instructions) rather than with libseccomp, so that it needs nothing but
the standard library: this module runs inside the sandbox, under whatever Python the venv has, where
the Debian ``python3-seccomp`` binding (tied to the system Python) is not importable.

What it denies, and why (the program gets ``EPERM`` unless noted):

- other processes' memory and descriptors: ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``,
  ``process_madvise``, ``kcmp``;
- state that would outlive the sample: the kernel keyrings (``keyctl``, ``add_key``,
  ``request_key``), SysV shared memory, semaphores and message queues, POSIX message queues;
- namespaces and mounts: ``unshare`` and ``clone`` with any ``CLONE_NEW*`` flag, ``setns``,
  ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the new mount API; ``clone3`` answers
  ``ENOSYS`` (its flags sit in memory a filter cannot read), so the C library falls back to ``clone``;
- kernel attack surface a contest program never needs: ``bpf``, ``perf_event_open``,
  ``userfaultfd``, ``io_uring_*`` (which would run I/O outside this filter), module, kexec, swap,
  reboot, clock, hostname, quota and accounting calls, ``open_by_handle_at``, ``syslog``, ...;
- foreign system-call ABIs (i386 ``int 0x80``, x32, 32-bit ARM): the process is killed, since their
  numbers differ and would bypass the list.

Everything else is allowed, so ordinary programs (threads, ``fork``, ``subprocess``, numpy) work.
The filter is installed after ``no_new_privs`` and is inherited by every descendant; it cannot be
removed, only narrowed further.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

# ---------------------------------------------------------------------------------- BPF encoding
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
BPF_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16  # struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6]

# every CLONE_NEW* flag: NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
CLONE_NAMESPACE_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise", "kcmp",
    "keyctl", "add_key", "request_key",
    "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semctl", "semtimedop",
    "msgget", "msgsnd", "msgrcv", "msgctl",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "acct", "swapon",
    "swapoff", "reboot", "sethostname", "setdomainname", "quotactl", "quotactl_fd", "open_by_handle_at",
    "name_to_handle_at", "syslog", "vhangup", "lookup_dcookie", "fanotify_init", "memfd_secret",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    # x86 only
    "iopl", "ioperm", "modify_ldt", "uselib", "ustat", "sysfs", "_sysctl", "nfsservctl",
)  # fmt: skip
NAMESPACE_CHECKED = ("clone", "unshare")  # denied only with a CLONE_NEW* flag in argument 0
ENOSYS_CALLS = ("clone3",)

# System-call numbers (from the kernel's unistd headers), per architecture.
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
        "process_madvise": 440, "kcmp": 312, "keyctl": 250, "add_key": 248, "request_key": 249,
        "shmget": 29, "shmat": 30, "shmdt": 67, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66,
        "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mq_open": 240,
        "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "acct": 163, "swapon": 167, "swapoff": 168, "reboot": 169,
        "sethostname": 170, "setdomainname": 171, "quotactl": 179, "quotactl_fd": 443, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "syslog": 103, "vhangup": 153, "lookup_dcookie": 212, "fanotify_init": 300,
        "memfd_secret": 447, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
        "iopl": 172, "ioperm": 173, "modify_ldt": 154, "uselib": 134, "ustat": 136, "sysfs": 139,
        "_sysctl": 156, "nfsservctl": 180,
        "clone": 56, "unshare": 272, "clone3": 435,
    },
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
        "process_madvise": 440, "kcmp": 272, "keyctl": 219, "add_key": 217, "request_key": 218,
        "shmget": 194, "shmat": 196, "shmdt": 197, "shmctl": 195, "semget": 190, "semop": 193, "semctl": 191,
        "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187, "mq_open": 180,
        "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183, "mq_notify": 184, "mq_getsetattr": 185,
        "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "acct": 89, "swapon": 224, "swapoff": 225, "reboot": 142,
        "sethostname": 161, "setdomainname": 162, "quotactl": 60, "quotactl_fd": 443, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "syslog": 116, "vhangup": 58, "lookup_dcookie": 18, "fanotify_init": 262,
        "memfd_secret": 447, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
        "clone": 220, "unshare": 97, "clone3": 435,
    },
}  # fmt: skip
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000


class FilterUnavailable(RuntimeError):
    """This machine's architecture has no table here, or the kernel refused the filter."""


def machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def build(arch: str | None = None) -> bytes:
    """The filter program for ``arch`` (default: this machine) as packed ``struct sock_filter``s."""
    arch = arch or machine()
    if arch not in SYSCALLS:
        raise FilterUnavailable(f"no system-call table for architecture {arch!r}")
    nr = SYSCALLS[arch]
    errno_eperm = SECCOMP_RET_ERRNO | errno.EPERM
    prog = [
        _insn(BPF_LD_W_ABS, 0, 0, OFF_ARCH),
        _insn(BPF_JEQ_K, 1, 0, AUDIT_ARCH[arch]),
        _insn(BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        _insn(BPF_LD_W_ABS, 0, 0, OFF_NR),
    ]
    if arch == "x86_64":  # x32 calls arrive with the x86_64 arch tag and bit 30 set
        prog += [_insn(BPF_JGE_K, 0, 1, X32_SYSCALL_BIT), _insn(BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS)]
    for name in DENIED:
        if name in nr:
            prog += [_insn(BPF_JEQ_K, 0, 1, nr[name]), _insn(BPF_RET_K, 0, 0, errno_eperm)]
    for name in ENOSYS_CALLS:
        prog += [_insn(BPF_JEQ_K, 0, 1, nr[name]), _insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS)]
    for name in NAMESPACE_CHECKED:
        prog += [
            _insn(BPF_JEQ_K, 0, 4, nr[name]),  # not this call: skip the 4 instructions below
            _insn(BPF_LD_W_ABS, 0, 0, OFF_ARG0),  # low 32 bits of the flags (little-endian)
            _insn(BPF_JSET_K, 0, 1, CLONE_NAMESPACE_FLAGS),
            _insn(BPF_RET_K, 0, 0, errno_eperm),
            _insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        ]
    prog.append(_insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_prepared: tuple | None = None


def prepare(program: bytes | None = None) -> None:
    """Build the filter and its C structures once (in the worker, before it forks), so that
    :func:`install` in each child is two system calls."""
    global _prepared
    program = program if program is not None else build()
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _prepared = (ctypes.CDLL(None, use_errno=True), buf, fprog)


def install() -> None:
    """Set ``no_new_privs`` and install the filter on the calling thread (a single-threaded child,
    before any untrusted code). Raises :class:`FilterUnavailable` if the kernel refuses."""
    if _prepared is None:
        prepare()
    libc, _, fprog = _prepared
    if libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise FilterUnavailable(f"prctl(NO_NEW_PRIVS) failed: errno {ctypes.get_errno()}")
    if libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise FilterUnavailable(f"prctl(SECCOMP_MODE_FILTER) failed: errno {ctypes.get_errno()}")
