"""Replay every shipped conformance vector (spec/vectors/, generated/ included) under its
declared variant; every one must exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochgc.model.replay import OPS, variant_from_filename
from epochgc.model.replay_cli import replay as replay_cmd
from epochgc.model.variants import VARIANTS

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"
ALL = sorted(VECTORS.rglob("*.jsonl"))
HAND = sorted(VECTORS.glob("*.jsonl"))  # the hand-written ones (generated/ is the lead's)


def _header(path: Path) -> str | None:
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text.startswith("#") and text.lstrip("# ").startswith("variant:"):
            return text.split(":", 1)[1].strip()
        if text and not text.startswith("#"):
            return None
    return None


def _steps(path: Path) -> list[dict[str, object]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(t) for t in (s.strip() for s in lines) if t and not t.startswith("#")]


def _id(path: Path) -> str:
    return str(path.relative_to(VECTORS))


def test_vectors_exist() -> None:
    assert len(HAND) >= 10


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_vector_replays_clean(path: Path) -> None:
    declared = _header(path) or variant_from_filename(path)
    assert declared in VARIANTS, f"{path.name}: no `# variant:` header or -VARIANT.jsonl name"
    res = CliRunner().invoke(replay_cmd, [str(path)])  # the CLI itself resolves the variant
    assert res.exit_code == 0, res.stderr + res.stdout


@pytest.mark.parametrize("path", HAND, ids=_id)
def test_hand_written_vector_checks_every_step(path: Path) -> None:
    assert _header(path) in VARIANTS
    for i, step in enumerate(_steps(path), start=1):
        assert "expect" in step, f"{path.name} step {i} has no expect"


def test_hand_written_vectors_cover_every_op_and_variant() -> None:
    ops = {s["op"] for p in HAND for s in _steps(p)}
    assert ops == set(OPS)
    assert {_header(p) for p in HAND} == set(VARIANTS)
