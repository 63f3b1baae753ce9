"""Local-directory backend: keys are relative paths under a root directory.

Listing walks only the directories on the way to `start_after` and stops as soon as a page
is full, so a page costs a few directory reads, never a walk of the whole tree.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from impl.store.base import (
    MAX_PAGE_SIZE,
    DeleteResult,
    ListPage,
    ObjectInfo,
    ObjectStore,
    StoreError,
    check_batch,
    check_key,
)

# Temp files of in-progress atomic puts; never listed as objects.
_TMP_PREFIX = ".epochgc-tmp-"


class LocalStore(ObjectStore):
    def __init__(self, root: str | os.PathLike[str], *, create: bool = False) -> None:
        self.root = Path(root).absolute()
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        if not self.root.is_dir():
            raise StoreError(f"store directory {self.root} does not exist or is not a directory")
        if not os.access(self.root, os.R_OK | os.X_OK):
            raise StoreError(f"store directory {self.root} is not readable")
        self._root = str(self.root)  # hot paths join strings: pathlib costs ~2x per key

    def __reduce__(self) -> tuple[type[LocalStore], tuple[str]]:
        return (LocalStore, (str(self.root),))

    def describe(self) -> str:
        return f"local directory {self.root}"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        tmp = path.with_name(f"{_TMP_PREFIX}{uuid.uuid4().hex}")
        for _ in range(3):  # a concurrent delete may remove an emptied parent directory
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)  # atomic on POSIX: readers see old or new bytes
                return
            except FileNotFoundError:
                continue
            except OSError as e:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise StoreError(f"cannot write {key!r} in {self.describe()}: {e}") from e
        raise StoreError(f"cannot write {key!r} in {self.describe()}: directory keeps vanishing")

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                if start:
                    f.seek(start)
                if end is None:
                    return f.read()
                return f.read(max(0, end - (start or 0)))
        except FileNotFoundError:
            raise StoreError(f"{key!r} does not exist in {self.describe()}") from None
        except OSError as e:
            raise StoreError(f"cannot read {key!r} in {self.describe()}: {e}") from e

    def head(self, key: str) -> ObjectInfo | None:
        try:
            st = self._path(key).stat()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StoreError(f"cannot stat {key!r} in {self.describe()}: {e}") from e
        return ObjectInfo(key, st.st_size, st.st_mtime)

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        limit: int = MAX_PAGE_SIZE,
        until: str | None = None,
    ) -> ListPage:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        out: list[ObjectInfo] = []
        dir_rel, _, name_prefix = prefix.rpartition("/")
        base = dir_rel + "/" if dir_rel else ""
        try:
            for info in self._walk(base, name_prefix, start_after or ""):
                if len(out) == limit:
                    return ListPage(out, truncated=True)
                out.append(info)
                if until is not None and info.key >= until:
                    return ListPage(out, truncated=True)  # spare the stat()s past the hint
        except OSError as e:
            raise StoreError(f"cannot list {prefix!r} in {self.describe()}: {e}") from e
        return ListPage(out, truncated=False)

    def _walk(self, base: str, name_prefix: str, after: str) -> Iterator[ObjectInfo]:
        """Keys under directory `base` (relative, '' or ending in '/') whose first component
        starts with `name_prefix`, greater than `after`, in key order."""
        try:
            with os.scandir(self._root + "/" + base if base else self._root) as it:
                entries = [e for e in it if e.name.startswith(name_prefix)]
        except (FileNotFoundError, NotADirectoryError):
            return  # an absent directory lists as empty, like an absent S3 prefix
        # A directory's keys all start with "name/", so sort it as "name/": that puts
        # "a.b" (0x2e) before "a/x" (0x2f) exactly as a flat key listing would.
        keyed = []
        for e in entries:
            if e.name.startswith(_TMP_PREFIX):
                continue
            is_dir = e.is_dir(follow_symlinks=False)
            keyed.append((base + e.name + ("/" if is_dir else ""), is_dir, e))
        keyed.sort(key=lambda t: t[0])
        for rel, is_dir, entry in keyed:
            if is_dir:
                if after.startswith(rel):
                    yield from self._walk(rel, "", after)
                elif rel > after:
                    yield from self._walk(rel, "", "")
                # else: the whole subtree sorts at or before `after`
            elif rel > after:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # deleted while listing
                yield ObjectInfo(rel, st.st_size, st.st_mtime)

    def delete_batch(self, keys: list[str]) -> DeleteResult:
        batch = check_batch(keys)
        result = DeleteResult(len(batch))
        parents: set[str] = set()
        for key in batch:
            try:
                os.unlink(f"{self._root}/{check_key(key)}")
            except FileNotFoundError:
                pass  # already gone: the goal is reached
            except (OSError, StoreError) as e:
                result.errors[key] = str(e)
                continue
            if "/" in key:
                parents.add(key.rpartition("/")[0])
        for parent in sorted(parents, key=lambda p: p.count("/"), reverse=True):
            self._prune(parent)
        return result

    def _prune(self, rel_dir: str) -> None:
        """Remove directories emptied by deletes (relative `rel_dir` and its ancestors), so
        dead epochs stop costing list time."""
        while rel_dir:
            try:
                os.rmdir(f"{self._root}/{rel_dir}")
            except OSError:
                return  # not empty (or already gone / raced with a put): stop here
            rel_dir = rel_dir.rpartition("/")[0]
