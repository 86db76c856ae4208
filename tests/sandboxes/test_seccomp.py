"""The seccomp filter's program (its effect is tested in test_adversarial.py)."""

from __future__ import annotations

import struct

import pytest

from agentgym.sandboxes import seccomp


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_the_program_checks_the_architecture_first_and_allows_last(machine):
    program = seccomp.filter_program(machine)
    assert len(program) % 8 == 0 and len(program) // 8 < 4096  # the kernel's limit
    rows = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    arch, numbers, _ = seccomp.ARCHES[machine]
    assert rows[0] == (0x20, 0, 0, 4)  # load seccomp_data.arch
    assert rows[1][0] == 0x15 and rows[1][3] == arch
    assert rows[-1] == (0x06, 0, 0, 0x7FFF0000)  # SECCOMP_RET_ALLOW
    compared = {k for code, _, _, k in rows if code == 0x15}
    assert {numbers[name] for name in seccomp.DENIED if name in numbers} <= compared


def test_an_unknown_architecture_is_named():
    with pytest.raises(ValueError, match=r"'sparc'.*x86_64"):
        seccomp.filter_program("sparc")
