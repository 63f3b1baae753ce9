"""The local store's listing classifies a link by the link itself (issue 31): a symbolic link
to a directory is refused under its own key, never walked as a directory and never keyed
as one ("name/"), and a link to a file is refused, not read."""

from __future__ import annotations

import os
from pathlib import Path

from epochgc.impl.store.local import LocalStore


def test_links_in_a_listing_are_refused_under_their_own_keys(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path / "root"), create=True)
    store.put("data/a/1", b"one")
    store.put("data/c", b"three")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"x")
    os.symlink(outside, tmp_path / "root" / "data" / "b")  # a link to a directory
    os.symlink(outside / "secret", tmp_path / "root" / "data" / "d")  # a link to a file
    page = store.list_page("data/")
    assert [o.key for o in page.objects] == ["data/a/1", "data/c"]
    assert [(k, "symbolic link" in why) for k, why in page.refused] == [
        ("data/b", True), ("data/d", True)], page.refused
