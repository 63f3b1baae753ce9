"""Seeded bugs in the disk log (issue 27): each is patched into a copy of the tree and the
tests named with it must fail. Prints one row per mutant; exits 1 if any survived.

    python -m tests.raft.disklog_mutants [NAME ...]

Not part of the default suite (a pytest run per mutant, about two minutes in all)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
T = "tests/raft/"
BASIC, REGRESS, INSTALL = (
    T + "test_disklog.py",
    T + "test_disklog_regress.py",
    T + "test_disklog_install.py",
)
CORRUPTION, RECOVERY = T + "test_disklog_corruption.py", T + "test_disklog_recovery.py"
UPGRADE, IDENTITY = T + "test_disklog_upgrade.py", T + "test_identity.py"
REVIEW = T + "test_review_disklog.py::"
PAGECACHE = T + "test_disklog_pagecache.py::"
REV37 = T + "test_review37.py::"
WBSTATES, FFIO = T + "test_writeback_states.py::", T + "test_faultfileio.py::"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    old: str
    new: str
    tests: str  # pytest arguments: the tests that must catch it
    old2: str = ""  # a second replacement (optional)
    new2: str = ""
    path2: str = ""  # the file of the second replacement (default: path)


MUTANTS = (
    Mutant(
        "install-commit-before-snapshot",
        "impl/raft/disklog.py",
        "hard_state.term, hard_state.vote, min(self._hs.commit, snapshot.index)",
        "hard_state.term, hard_state.vote, min(hard_state.commit, self._last[0])",
        f"{INSTALL}",
    ),
    Mutant(
        "no-chain",
        "impl/raft/diskrecovery.py",
        "seed = crc if chained else 0",
        "seed = 0",
        f"{CORRUPTION}",
    ),
    Mutant(
        "no-chain-writer-too",
        "impl/raft/disklog.py",
        "            crc = crc32(payload, crc)\n",
        "            crc = crc32(payload, 0)\n",
        f"{CORRUPTION} {WBSTATES}test_stale_records_of_an_older_history_never_chain_after_the_"
        "new_ones",
        "seed = crc if chained else 0",
        "seed = 0",
        path2="impl/raft/diskrecovery.py",
    ),
    Mutant(
        "no-cross-segment-chain",
        "impl/raft/diskrecovery.py",
        "if prev_crc is not None and chain != prev_crc:",
        "if False:",
        f"{CORRUPTION}",
    ),
    Mutant(
        "no-group-check",
        "impl/raft/diskrecovery.py",
        "if group != self.group:\n            raise ValueError",
        "if False:\n            raise ValueError",
        f"{CORRUPTION}",
    ),
    Mutant(
        "no-snapshot-group-check",
        "impl/raft/diskrecovery.py",
        "        if group != self.group:\n            raise StorageCorruption(",
        "        if False:\n            raise StorageCorruption(",
        f"{CORRUPTION}",
    ),
    Mutant(
        "no-seq-check",
        "impl/raft/diskrecovery.py",
        "if seq != g.seq:",
        "if False:",
        f"{CORRUPTION} {RECOVERY}",
    ),
    Mutant(
        "no-fresh-rule",
        "impl/raft/diskrecovery.py",
        "if g.seq != self._install_seq:",
        "if False:",
        f"{CORRUPTION} {RECOVERY}",
    ),
    Mutant(
        "no-install-tag-check",
        "impl/raft/diskrecovery.py",
        "if tag != self._install_tag:",
        "if False:",
        f"{CORRUPTION} {RECOVERY} {INSTALL}",
    ),
    Mutant(
        "no-hs-monotonic",
        "impl/raft/diskrecovery.py",
        "if hs.term < self._hs.term:",
        "if False:",
        f"{CORRUPTION}",
    ),
    Mutant(
        "no-hs-monotonic-nor-final",
        "impl/raft/diskrecovery.py",
        "if hs.term < self._hs.term:",
        "if False:",
        f"{CORRUPTION}",
        "if self._hs.term < prev:",
        "if False:",
    ),
    Mutant(
        "unlink-instead-of-quarantine",
        "impl/raft/diskrecovery.py",
        "                    self.fs.replace(path, self._quarantine_name("
        "os.path.basename(path)))\n",
        "                    self._quarantine_name(os.path.basename(path))\n"
        "                    self.fs.unlink(path)\n",
        f"{RECOVERY} {UPGRADE}",
    ),
    Mutant(
        "no-redundancy-check",
        "impl/raft/diskrecovery.py",
        "if g.seq >= self._install_seq and top > self._snap.index:",
        "if False:",
        f"{CORRUPTION} {RECOVERY}",
    ),
    Mutant(
        "old-torn-rule",
        "impl/raft/diskformat.py",
        "        if not any(data[lo : min(hi, len(data))]):\n            return True",
        "        if not any(data[lo:]):\n            return True",
        f"{RECOVERY} {BASIC} {REGRESS}",
    ),
    Mutant(
        "etcd-loose-torn-rule",
        "impl/raft/diskformat.py",
        "        if not any(data[lo : min(hi, len(data))]):",
        "        if not any(data[lo : min(hi, end)]):",
        # (equivalent on format-5 records, whose last byte is never zero: format 4's)
        f"{RECOVERY} {CORRUPTION} {BASIC} {REGRESS} "
        f"{PAGECACHE}test_a_damaged_format4_record_ending_in_zeros_is_refused",
    ),
    Mutant(
        "torn-anywhere",
        "impl/raft/diskrecovery.py",
        "            if torn and last:",
        "            if torn:",
        f"{CORRUPTION} {BASIC} {REGRESS}",
    ),
    Mutant(
        "mkdir-no-parent-fsync",
        "impl/raft/fileio.py",
        "        fs.fsync_dir(os.path.dirname(d))\n",
        "        pass\n",
        f"{RECOVERY}",
    ),
    Mutant(
        "mutate-before-validate",
        "impl/raft/diskrecovery.py",
        "        self._check_redundant(stale, run)\n        log = self._replay(run, plan)\n",
        "        self._apply(_Plan(quarantine=[g.path for g in stale]))\n"
        "        log = self._replay(run, plan)\n",
        f"{CORRUPTION} {RECOVERY}",
    ),
    Mutant(
        "upgrade-switch-first",
        "impl/raft/diskupgrade.py",
        "        if not leftover:\n            try:\n",
        "        self._write_snapshot_file(snap, seq, tag)\n        if not leftover:\n"
        "            try:\n",
        f"{UPGRADE}",
    ),
    Mutant(
        "no-final-hs-check",
        "impl/raft/diskrecovery.py",
        "if self._hs.term < prev:",
        "if False:",
        f"{CORRUPTION} {RECOVERY}",
    ),
    Mutant(
        "no-format3-commit-clamp",
        "impl/raft/diskrecovery.py",
        "if self._hs.commit > last and v3_pre_install:",
        "if False:",
        f"{UPGRADE}",
    ),
    # The independent review's defects (tests/raft/test_review_disklog.py), re-introduced.
    Mutant(
        "upgrade-format4-by-default",
        "impl/raft/diskrecovery.py",
        "leftover = [g for g in segs if g.data[: len(MAGIC)] in _MAGICS]",
        "leftover = [g for g in segs if g.fmt in (FORMAT, FORMAT4)]",
        f"{REVIEW}test_format3_upgrade_after_a_crash_at_a_segment_cut",
    ),
    Mutant(
        "upgrade-format4-magic-for-format3",
        "impl/raft/diskrecovery.py",
        "own_magic = MAGIC[:7] + bytes([g.fmt])",
        "own_magic = MAGIC",
        f"{REVIEW}test_format3_upgrade_after_a_crash_at_a_segment_cut",
    ),
    Mutant(
        "upgrade-quarantine-twice",
        "impl/raft/diskrecovery.py",
        "for path in dict.fromkeys(plan.quarantine):",
        "for path in plan.quarantine:",
        f"{REVIEW}test_format3_upgrade_with_a_stale_segment_starts_first_time",
    ),
    Mutant(
        "upgrade-remnants-after-switch-refused",
        "impl/raft/diskrecovery.py",
        "            upgraded = self._upgraded(segs)\n",
        "            upgraded = False\n",
        f"{REVIEW}test_a_crash_at_every_call_of_the_upgrade_then_inside_its_recovery",
    ),
    Mutant(
        "non-regular-files-read",
        "impl/raft/diskrecovery.py",
        "if kind is not EntryKind.REGULAR:",
        "if False:",
        f"{REVIEW}test_a_fifo_in_place_of_a_segment_is_refused_not_read "
        f"{REVIEW}test_a_symlink_in_place_of_a_segment_is_refused",
    ),
    Mutant(
        "delete-every-tmp",
        "impl/raft/diskrecovery.py",
        "plan = _Plan(tmp=[self._path(n) for n in names if _OWN_TMP.fullmatch(n)])",
        'plan = _Plan(tmp=[self._path(n) for n in names if n.endswith(".tmp")])',
        f"{REVIEW}test_a_foreign_tmp_file_is_not_deleted",
    ),
    Mutant(
        "no-reset-on-load",
        "impl/raft/diskrecovery.py",
        "        self._reset()  # nothing of an earlier",
        "        pass  # nothing of an earlier",
        f"{REVIEW}test_a_second_load_after_a_refusal_starts_clean",
    ),
    Mutant(
        "torn-tail-not-kept",
        "impl/raft/diskrecovery.py",
        "                if any(tail):\n",
        "                if False:\n",
        f"{REVIEW}test_the_bytes_cut_off_as_a_torn_tail_are_kept_aside",
    ),
    Mutant(
        "torn-tail-cut-before-kept",
        "impl/raft/diskrecovery.py",
        "                self.fs.truncate(path, off)\n",
        "",
        f"{REVIEW}test_a_crash_at_every_call_of_a_recovery_that_keeps_a_torn_tail_aside",
        "                tail = self.fs.read(path)[off:]  # (only after a crash: a torn tail "
        "is rare)\n",
        "                tail = self.fs.read(path)[off:]\n"
        "                self.fs.truncate(path, off)\n",
    ),
    # issue 37: the four defects seeded back
    Mutant(
        "recovery-reads-page-cache",
        "impl/raft/diskrecovery.py",
        "            return self.fs.read_durable(path)\n",
        "            return self.fs.read(path)\n",
        f"{PAGECACHE}test_item1_restart_after_a_failed_fsync_acknowledges_only_what_the_disk_"
        f"holds {FFIO}test_a_restart_after_a_failed_fsync_acknowledges_only_what_the_device_"
        "holds",
    ),
    Mutant(
        "syncfs-descriptor-per-barrier",
        "impl/raft/groupcommit.py",
        "                self.fs.syncfs(self._fs_fd)\n",
        "                fd = self.fs.open_fs(self.path)\n"
        "                self.fs.syncfs(fd)\n"
        "                self.fs.close(fd)\n",
        f"{PAGECACHE}test_item2_another_tenants_writeback_error_fails_the_group_commit_barrier",
    ),
    Mutant(
        "record-zero-trailer",
        "impl/raft/diskformat.py",
        '_TRAILER = b"\\xa5"\n',
        '_TRAILER = b"\\x00"\n',
        f"{PAGECACHE}test_items_3_4_bit_damage_of_a_fsynced_log_is_refused_never_cut",
    ),
    Mutant(
        "record-no-length-marker",
        "impl/raft/diskformat.py",
        "_MARK = 0xE000_0000 ",
        "_MARK = 0x0000_0000 ",
        f"{PAGECACHE}test_items_3_4_bit_damage_of_a_fsynced_log_is_refused_never_cut",
        " or (framed and word & _MARK != _MARK)",
        "",
        path2="impl/raft/diskrecovery.py",
    ),
    Mutant(
        "identity-missing-adopted",
        "impl/raft/identity.py",
        "    if named is not None:\n        raise IdentityMissing(path, named)\n",
        "",
        f"{REVIEW}test_identity_file_deleted_is_refused",
    ),
    Mutant(
        "identity-not-checked",
        "impl/raft/identity.py",
        "        if found.node_id != node_id or (\n"
        "                found.cluster_id != cluster_id and found.cluster_id not in adopt):",
        "        if False:",
        f"{IDENTITY}",
    ),
    Mutant(
        "durable-read-no-fadvise-dontneed",
        "impl/raft/fileio.py",
        "            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n",
        "",
        f"{REV37}test_os_read_durable_fsyncs_drops_the_cache_then_reads_with_o_direct",
    ),
    Mutant(
        "durable-read-without-o-direct",
        "impl/raft/fileio.py",
        'os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))',
        "os.open(path, os.O_RDONLY)",
        f"{REV37}test_os_read_durable_fsyncs_drops_the_cache_then_reads_with_o_direct",
    ),
    Mutant(
        "durable-read-without-fsync",
        "impl/raft/fileio.py",
        "            os.fsync(fd)\n            # Pages that failed",
        "            # Pages that failed",
        f"{REV37}test_os_read_durable_fsyncs_drops_the_cache_then_reads_with_o_direct",
    ),
    Mutant(
        "syncfs-sampled-at-first-barrier",
        "impl/raft/groupcommit.py",
        "            self._fs_fd = self.fs.open_fs(path)\n",
        "            self._fs_fd = -2\n",
        f"{REV37}test_a_tenants_error_before_the_first_barrier_fails_it",
        "                self.fs.syncfs(self._fs_fd)",
        "                if self._fs_fd == -2:\n"
        "                    self._fs_fd = self.fs.open_fs(self.path)\n"
        "                self.fs.syncfs(self._fs_fd)",
    ),
    Mutant(
        "one-bit-length-marker",
        "impl/raft/diskformat.py",
        "_MARK = 0xE000_0000 ",
        "_MARK = 0x8000_0000 ",
        f"{REV37}test_one_flipped_bit_of_a_header_in_a_sectors_last_bytes_is_refused",
    ),
    Mutant(
        "no-trailer-check",
        "impl/raft/diskrecovery.py",
        "framed and data[body_end:end] != _TRAILER",
        "False",
        f"{REV37}test_every_single_bit_flip_of_the_last_record_is_refused",
    ),
)


def run(m: Mutant) -> tuple[bool, str]:
    """Patch a copy of the tree with `m`, run its tests; (caught, first failure line)."""
    with tempfile.TemporaryDirectory(prefix="disklog-mutant-") as tmp:
        d = Path(tmp)
        ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache")
        for part in ("epochgc", "impl", "tests", "model"):
            if (ROOT / part).is_dir():
                # Links stay links (epochgc/impl is `../impl`): the patched file is imported.
                shutil.copytree(ROOT / part, d / part, symlinks=True, ignore=ignore)
        shutil.copy(ROOT / "pyproject.toml", d / "pyproject.toml")
        for path, old, new in ((m.path, m.old, m.new), (m.path2 or m.path, m.old2, m.new2)):
            if old:
                target = d / path
                text = target.read_text()
                if old not in text:
                    raise SystemExit(f"{m.name}: the code to patch is gone from {path}")
                target.write_text(text.replace(old, new))
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                "-x",
                *m.tests.split(),
            ],
            cwd=d,
            env={"PYTHONPATH": str(d), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
        )
        why = next((x for x in r.stdout.splitlines() if x.startswith(("E ", "FAILED"))), "")
        return r.returncode != 0, why[:150]


def main(names: list[str]) -> int:
    """Run the named mutants (all by default); 1 if one survived."""
    survived = 0
    for m in MUTANTS:
        if names and m.name not in names:
            continue
        caught, why = run(m)
        survived += not caught
        print(f"{m.name:32s} {'caught' if caught else 'SURVIVED'}  {why}", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
