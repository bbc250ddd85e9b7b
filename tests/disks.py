"""A disk that fills up, for the code that writes to one (the decision spool)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from routing.recording import spool as spool_module


class FillingDisk:
    """os.write for files under ``directory`` as on a disk with ``room`` bytes left: it
    writes what fits and then fails with ENOSPC, as a real one does (other files are
    written as usual). ``free()`` makes room again."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, directory: Path, room: int) -> None:
        self.directory, self.room = str(directory), room
        self.real = os.write
        monkeypatch.setattr(spool_module.os, "write", self.write)

    def write(self, fd: int, data: Any) -> int:
        if not os.readlink(f"/proc/self/fd/{fd}").startswith(self.directory):
            return self.real(fd, data)
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        written = self.real(fd, bytes(data[: self.room]))
        self.room -= written
        return written

    def free(self) -> None:
        self.room = 1 << 30
