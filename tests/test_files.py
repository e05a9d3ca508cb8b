"""echosim._files.atomic_file: the one writer of every file echosim writes (temp file in the
same directory, fsync, rename; never through a link; a failed write keeps the old file)."""

import errno
import os

import pytest

from echosim import _files


def test_temp_files_are_created_exclusively_under_random_names(tmp_path, monkeypatch):
    target = tmp_path / "packs" / "0123456789abcdef-1.parquet"
    names = set()
    for _ in range(3):
        with _files.atomic_file(target) as f:
            names |= {p.name for p in target.parent.glob(".*.tmp")}
            f.write(b"x")
    assert len(names) == 3 and all(str(os.getpid()) in n for n in names)  # random, and the writer's pid
    assert {_files.temp_pid(n) for n in names} == {os.getpid()}
    # a link planted at the temp name (were it guessed) makes the write fail, never follow it
    victim = tmp_path / "victim"
    victim.write_text("precious")
    monkeypatch.setattr(_files.secrets, "token_hex", lambda n: "guessed")
    (target.parent / _files.temp_name(target.name)).symlink_to(victim)
    with pytest.raises(FileExistsError):
        with _files.atomic_file(target) as f:
            f.write(b"overwritten")
    assert victim.read_text() == "precious" and target.read_bytes() == b"x"


def test_an_os_error_inside_a_write_names_the_file_and_says_nothing_was_written(tmp_path):
    target = tmp_path / "packs" / "pack.parquet"
    with pytest.raises(OSError) as info:
        with _files.atomic_file(target):
            raise OSError(errno.ENOSPC, "No space left on device")  # as f.write raises it: no file name
    assert info.value.filename == str(target) and info.value.errno == errno.ENOSPC
    assert info.value.strerror == "No space left on device; pack.parquet was not written"
    assert not list(target.parent.glob(".*.tmp")) and not target.exists()


@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
def test_a_failed_write_leaves_the_previous_file_intact_and_says_so(tmp_path, monkeypatch, where):
    target = tmp_path / "summary.parquet"
    target.write_bytes(b"the old table")

    def full(*args, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    if where != "write":
        monkeypatch.setattr(_files.os, where, full)
    with pytest.raises(OSError) as info:
        with _files.atomic_file(target) as f:
            f.write(b"half of the new")
            if where == "write":
                full()
    monkeypatch.undo()
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert "the previous summary.parquet is left as it was" in info.value.strerror
    assert target.read_bytes() == b"the old table"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.parquet"]  # no temp file left


def test_data_reach_the_disk_before_the_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(_files.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(_files.os, "replace", lambda *a, **kw: (calls.append("replace"), real_replace(*a, **kw))[1])
    with _files.atomic_file(tmp_path / "t.json") as f:
        f.write(b"{}")
    assert calls[:2] == ["fsync", "replace"]  # the file's data, then the rename (then the directory)
    assert (tmp_path / "t.json").read_bytes() == b"{}"


def test_a_link_at_the_target_is_replaced_never_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out.json").symlink_to(victim)
    with _files.atomic_file(tmp_path / "out.json") as f:
        f.write(b"new")
    assert victim.read_text() == "precious" and not (tmp_path / "out.json").is_symlink()
    assert (tmp_path / "out.json").read_bytes() == b"new"
