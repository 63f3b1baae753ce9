"""newuser15 S1 (issue 41): `gc-package` wrote its zip through a fixed `epochgc.zip.tmp`
beside it, replacing (then renaming away) a user's file of that name, though its help says
"other files in it are left alone"; and two builds into one directory fought over that name
(one failed: "epochgc.zip.tmp: No such file or directory")."""

from __future__ import annotations

import os
import threading
import zipfile
from pathlib import Path

from epochgc.impl.gc.package import build_zip


def test_a_users_file_of_the_temporary_name_is_left_alone(tmp_path: Path) -> None:
    mine = tmp_path / "epochgc.zip.tmp"
    mine.write_text("my precious notes")
    out = build_zip(tmp_path / "epochgc.zip")
    assert mine.read_text() == "my precious notes"
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None and "epochgc/__init__.py" in z.namelist()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epochgc.zip", "epochgc.zip.tmp"]


def test_builds_into_one_directory_at_once_all_succeed(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def build() -> None:
        start.wait()
        try:
            build_zip(tmp_path / "epochgc.zip")
        except BaseException as e:  # collected, asserted below
            errors.append(e)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with zipfile.ZipFile(tmp_path / "epochgc.zip") as z:
        assert z.testzip() is None
    assert [p.name for p in tmp_path.iterdir()] == ["epochgc.zip"]  # no temporary left


def test_the_zip_is_readable_as_an_ordinary_new_file(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        out = build_zip(tmp_path / "epochgc.zip")
    finally:
        os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o644
