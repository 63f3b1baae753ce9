"""The key grammar row (issue 28): exhaustive on the model's parser, and it fails on a
formatter that drops the zero padding or a parser that accepts a longer epoch."""

from __future__ import annotations

import pytest

import epochgc.model.keys as keys
from epochgc.proofs import keygrammar


def test_key_grammar_holds() -> None:
    (row,) = keygrammar.task_keys()
    assert row.status == "checked" and row.kind == "invariant", row.detail


def test_unpadded_keys_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    real = keys.format_key

    def unpadded(prefix: int, epoch: int, name: str) -> str:
        real(prefix, epoch, name)
        return keys.prefix_path(prefix) + f"{epoch:d}/{name}"

    monkeypatch.setattr(keygrammar, "format_key", unpadded)
    assert keygrammar.check()


def test_a_parser_that_misreads_the_epoch_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(key: str) -> keys.L0Key:
        k = keys.parse_key(key)
        return keys.L0Key(k.prefix, k.epoch // 10, k.name)

    monkeypatch.setattr(keygrammar, "parse_key", parse)
    assert any(b.startswith("round trip") for b in keygrammar.check())
