"""protolab.files: scratch directories a killed process leaves behind are removed by the next
process that makes one of the same kind, and nothing else is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from protolab.files import remove_orphaned_scratch, scratch_dir


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_only_directories_of_the_kind_whose_process_is_gone_are_removed(tmp_path: Path) -> None:
    dead, alive = _dead_pid(), os.getpid()
    orphan = tmp_path / f"protolab-lab-{dead}-abc"
    (orphan / "sub").mkdir(parents=True)
    (orphan / "sub" / "emu.stderr").write_text("x")
    kept = [
        tmp_path / f"protolab-lab-{alive}-live",        # a live process's
        tmp_path / f"protolab-run-{dead}-other-kind",   # another kind
        tmp_path / "protolab-lab-abcdefgh",              # no pid (an older run's name)
        tmp_path / f"protolab-lab-{dead}",               # no separator after the pid
        tmp_path / "protolab-lab-0-zero",                # pid 0 is never a process of ours
        tmp_path / f"pl-lab-{dead}-x",                   # not ours at all
    ]
    for directory in kept:
        directory.mkdir()
    not_a_directory = tmp_path / f"protolab-lab-{dead}-file"
    not_a_directory.write_text("a file")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "precious").write_text("keep")
    link = tmp_path / f"protolab-lab-{dead}-link"
    link.symlink_to(target, target_is_directory=True)

    assert remove_orphaned_scratch("lab", tmp_path) == [orphan]
    assert not orphan.exists()
    assert all(directory.is_dir() for directory in kept)
    assert not_a_directory.is_file() and link.is_symlink() and (target / "precious").read_text() == "keep"
    assert remove_orphaned_scratch("lab", tmp_path) == [], "idempotent"


def test_a_new_scratch_directory_carries_the_pid_and_sweeps_its_kind(tmp_path: Path, monkeypatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    orphan = tmp_path / f"protolab-probe-{_dead_pid()}-old"
    orphan.mkdir()
    made = scratch_dir("probe")
    assert made.is_dir() and made.parent == tmp_path
    assert made.name.startswith(f"protolab-probe-{os.getpid()}-")
    assert oct(made.stat().st_mode & 0o777) == oct(0o700), "private, as mkdtemp makes it"
    assert not orphan.exists()
    assert scratch_dir("probe").is_dir() and made.is_dir(), "our own live directory stays"
