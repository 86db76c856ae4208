"""The local sandbox's seccomp filter: system calls an agent never needs, refused.

Docker's default profile is the reference. Commands in a sandbox run without capabilities,
so most of these calls would fail anyway; the filter takes away the kernel surface behind
them (new user namespaces, where a process regains every capability; the new mount API;
keyrings; BPF; io_uring) and the calls that would act on the whole machine (modules,
kexec, clocks, swap, reboot). What stays allowed is what ordinary programs use, ``ptrace``
included: a debugger may trace the agent's own processes, while the sandbox's PID 1 is
protected by being non-dumpable (see :mod:`agentgym.sandboxes.local`). A sealed session
(a grader's, ``Sandbox.seal_session``) stacks :func:`seal_program` on it, which refuses
the tracing calls too (:data:`TRACING`).

The filter is a classic BPF program, built here without libseccomp, for x86-64 and
AArch64. A refused call fails with ``EPERM`` (``ENOSYS`` for ``clone3``, so that the C
library falls back to ``clone``, whose flags a classic filter can read). Calls of another
ABI (32-bit or x32 on x86-64) are refused outright, since their numbers differ.
"""

from __future__ import annotations

import errno
import platform
import struct

from agentgym.core.errors import InvalidArgumentError

# BPF instruction classes and fields (linux/filter.h), seccomp return values (seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K, _JGE_K, _JSET_K = 0x15, 0x35, 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_KILL_PROCESS = 0x80000000
# Offsets in struct seccomp_data: nr, arch, then args[6] as 64-bit words from 16 (the low
# half first on these little-endian machines).
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

#: Namespace flags of clone(2) and unshare(2). CLONE_NEWTIME (0x80) is unshare-only: in
#: clone's flags that bit belongs to the exit signal.
_NEW_NAMESPACES = 0x7E020000
_NEW_TIME = 0x80

#: Refused system calls.
DENIED = (
    # mounts and the new mount API; another root or namespace
    "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr", "setns",
    # kernel keyrings
    "keyctl", "add_key", "request_key",
    # kernel modules and kexec
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    # kernel surface with a history of privilege escalations
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
    # the whole machine: clocks, swap, reboot, accounting, quotas, the kernel log
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "swapon", "swapoff",
    "reboot", "acct", "quotactl", "quotactl_fd", "syslog", "nfsservctl",
    # x86 port I/O and obsolete calls
    "iopl", "ioperm", "uselib", "create_module", "get_kernel_syms", "query_module",
    "sysfs", "_sysctl", "ustat",
)

#: Refused in a sealed session (a grader's, see ``Sandbox.seal_session``) besides
#: :data:`DENIED`: tracing another process, reading or writing its memory, taking its
#: descriptors.
TRACING = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")

_X86_64 = {
    "mount": 165, "umount2": 166, "pivot_root": 155, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "move_mount": 429, "open_tree": 428,
    "mount_setattr": 442, "setns": 308, "keyctl": 250, "add_key": 248, "request_key": 249,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
    "kexec_file_load": 320, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "lookup_dcookie": 212,
    "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179,
    "quotactl_fd": 443, "syslog": 103, "nfsservctl": 180, "iopl": 172, "ioperm": 173,
    "uselib": 134, "create_module": 174, "get_kernel_syms": 177, "query_module": 178,
    "sysfs": 139, "_sysctl": 156, "ustat": 136,
    "clone": 56, "clone3": 435, "unshare": 272,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
}
# AArch64 uses the generic table; it has no x86-only or obsolete calls.
_AARCH64 = {
    "mount": 40, "umount2": 39, "pivot_root": 41, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "move_mount": 429, "open_tree": 428,
    "mount_setattr": 442, "setns": 268, "keyctl": 219, "add_key": 217, "request_key": 218,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104,
    "kexec_file_load": 294, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_by_handle_at": 265, "name_to_handle_at": 264, "lookup_dcookie": 18,
    "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
    "swapon": 224, "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60,
    "quotactl_fd": 443, "syslog": 116, "nfsservctl": 42,
    "clone": 220, "clone3": 435, "unshare": 97,
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
}
#: machine -> (AUDIT_ARCH_* value, syscall numbers, first number of a foreign ABI or None)
ARCHES = {
    "x86_64": (0xC000003E, _X86_64, 0x40000000),  # x32 calls carry bit 30
    "aarch64": (0xC00000B7, _AARCH64, None),
}


def supported() -> bool:
    """Whether a filter can be built for this machine's architecture."""
    return _machine() in ARCHES


def _machine() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None, *, denied: tuple[str, ...] = DENIED) -> bytes:
    """The filter as raw ``struct sock_filter`` instructions (what ``bwrap --seccomp``
    reads from a file descriptor), for ``machine`` (default: this one), refusing
    ``denied`` and new namespaces."""
    machine = machine or _machine()
    if machine not in ARCHES:
        raise InvalidArgumentError(f"no seccomp filter for the {machine!r} architecture; supported:"
                                   f" {', '.join(ARCHES)}")
    arch, numbers, foreign = ARCHES[machine]
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    program = [_op(_LD_W_ABS, _ARCH), _op(_JEQ_K, arch, jt=1), _op(_RET_K, _KILL_PROCESS),
               _op(_LD_W_ABS, _NR)]
    if foreign is not None:
        program += [_op(_JGE_K, foreign, jf=1), _op(_RET_K, eperm)]
    for name in denied:
        if name in numbers:
            program += [_op(_JEQ_K, numbers[name], jf=1), _op(_RET_K, eperm)]
    program += [_op(_JEQ_K, numbers["clone3"], jf=1), _op(_RET_K, enosys)]
    for name, flags in (("clone", _NEW_NAMESPACES), ("unshare", _NEW_NAMESPACES | _NEW_TIME)):
        program += [
            _op(_JEQ_K, numbers[name], jf=4),
            _op(_LD_W_ABS, _ARG0_LOW),
            _op(_JSET_K, flags, jf=1),
            _op(_RET_K, eperm),
            _op(_LD_W_ABS, _NR),  # reload for the next test (reached when flags are clean)
        ]
    program.append(_op(_RET_K, _ALLOW))
    return b"".join(program)


def seal_program(machine: str | None = None) -> bytes:
    """The filter of a sealed session, stacked on the sandbox's: :data:`DENIED` and
    :data:`TRACING` refused."""
    return filter_program(machine, denied=DENIED + TRACING)


__all__ = ["ARCHES", "DENIED", "TRACING", "filter_program", "seal_program", "supported"]
