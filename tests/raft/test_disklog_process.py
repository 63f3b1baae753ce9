"""A real write failure in a real node process: `node_main` (one-node cluster, DiskStorage on the
real file system) under RLIMIT_FSIZE, so its segment writes fail with EFBIG part-way (a short
write, then an error, as on a full disk). The process must stop with a clear error, and
everything it acknowledged must be on disk afterwards."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from epochgc.impl.ports import free_ports
from epochgc.impl.raft.disklog import DiskStorage
from epochgc.impl.raft.kv import OP_PUT, ST_OK, KVClient, decode_command

ROOT = Path(__file__).resolve().parents[2]


def _limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (48 * 1024, 48 * 1024))


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE semantics")
def test_write_failure_stops_the_process_and_every_ack_is_on_disk(tmp_path: Path) -> None:
    raft, client = free_ports(2)
    data = tmp_path / "n1"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "epochgc.impl.raft.node_main",
            "--id",
            "1",
            "--peers",
            f"1=127.0.0.1:{raft}",
            "--client-port",
            str(client),
            "--data-dir",
            str(data),
            "--tick",
            "0.02",
            "--snapshot-interval",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=_limit,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("READY")
        acked = asyncio.run(_load(client))
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.returncode != 0
    assert "storage failed" in err and "File too large" in err, err[-2000:]
    assert 0 < len(acked) < 200
    init = DiskStorage(str(data / "g1")).load()
    keys = {decode_command(e.data)[1] for e in init.entries if e.type == 1}
    assert acked <= keys


async def _load(port: int) -> set[bytes]:
    cl = None
    for _ in range(100):
        try:
            cl = await KVClient.connect("127.0.0.1", port)
            status, _, _ = await cl.request(OP_PUT, b"probe", b"")
            if status == ST_OK:
                break
            await cl.close()
        except OSError:
            pass
        cl = None
        await asyncio.sleep(0.05)
    assert cl is not None
    acked = {b"probe"}
    try:
        for i in range(200):
            try:
                status, _, _ = await asyncio.wait_for(
                    cl.request(OP_PUT, b"k%d" % i, b"v" * 1000), 2
                )
            except (ConnectionError, TimeoutError):
                break
            if status == ST_OK:
                acked.add(b"k%d" % i)
    finally:
        await cl.close()
    return acked
