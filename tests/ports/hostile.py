"""Hand-written programs at the edges of spec/VECTORS.md, each a question a port author had
to settle: the port's replay must answer every one exactly as `epochgc replay` does (same
exit code, same result lines). The shipped vectors cannot hold most of these (a replay
stops at the first bad step); `epochgc conform` generates few of them."""

from __future__ import annotations

A5 = '{"op":"apply_placeholder","epoch":5,"offset":0}'
A7 = '{"op":"apply_placeholder","epoch":7,"offset":1}'  # strict: [7,7], else [5,7]
KEY1 = "level_zero/data/000/000000000000000001/a"

PROGRAMS: dict[str, list[str]] = {
    # --- the variant header (grammar, place, repetition) ---
    "header-no-space": ["#variant: strict", A5, A7],
    "header-no-space-after-colon": ["# variant:strict", A5, A7],
    "header-capital-is-a-comment": ["# Variant: strict", A5, A7],
    "header-indented": ["   # variant: strict", A5, A7],
    "header-trailing-words-are-the-name": ["# variant: strict extra", A5, A7],
    "header-trailing-space": ["# variant: strict  ", A5, A7],
    "header-empty-name": ["# variant:", A5],
    "header-unknown": ["# variant: bogus", A5],
    "header-twice": ["# variant: strict", "# variant: strict", A5],
    "header-after-a-step": [A5, "# variant: strict", A7],
    "header-in-prose-is-a-comment": ["# the variant: strict", A5, A7],
    # --- JSON strictness ---
    "duplicate-key": ['{"op":"state","note":"a","note":"b"}'],
    "duplicate-key-nested": ['{"op":"state","expect":{"op":"state","op":"state"}}'],
    "nan-literal": ['{"op":"gc_eligible","key":"x","age_s":NaN,"M":5,"grace_s":0}'],
    "infinity-literal": ['{"op":"gc_eligible","key":"x","age_s":Infinity,"M":5,"grace_s":0}'],
    "huge-float-age": [f'{{"op":"gc_eligible","key":"{KEY1}","age_s":1e400,"M":5,"grace_s":0}}'],
    "truncated-json": ['{"op":"state"'],
    "trailing-garbage": ['{"op":"state"} x'],
    "not-an-object": ["[1]"],
    "a-bare-string": ['"state"'],
    "crlf-line-end": ['{"op":"state"}\r'],
    "lone-surrogate-in-note": ['{"op":"state","note":"\\ud800"}'],
    "control-char-in-string": ['{"op":"state","note":"a\tb"}'],
    "integer-as-float": ['{"op":"fence","term":1.0,"epoch":1}'],
    "integer-with-exponent": ['{"op":"fence","term":1e2,"epoch":1}'],
    "negative-zero-is-zero": ['{"op":"fence","term":-0,"epoch":1}'],
    "bool-is-not-an-integer": ['{"op":"fence","term":true,"epoch":1}'],
    "bool-age": ['{"op":"gc_eligible","key":"x","age_s":true,"M":5,"grace_s":0}'],
    # --- numbers beyond 2^53 are exact ---
    "largest-key-epoch-vs-M": [
        '{"op":"gc_eligible","key":"level_zero/data/000/999999999999999999/a","age_s":0,'
        '"M":999999999999999998,"grace_s":0}'
    ],
    "epoch-beyond-64-bits": [
        '{"op":"fence","term":1,"epoch":123456789012345678901234567890}',
        '{"op":"apply_placeholder","epoch":123456789012345678901234567891,"offset":9007199254740993}',
        '{"op":"apply_reconciled","lrlo":9007199254740993}',
        '{"op":"state"}',
    ],
    # --- fields ---
    "note-not-a-string": ['{"op":"state","note":3}'],
    "step-key-in-a-step": ['{"op":"state","step":1}'],
    "unknown-op": ['{"op":"compact"}'],
    "op-null": ['{"op":null}'],
    "missing-op": ['{"epoch":1}'],
    "missing-field": ['{"op":"fence","term":1}'],
    "unknown-field": ['{"op":"fence","term":1,"epoch":1,"epcoh":2}'],
    "empty-node": ['{"op":"fence","term":1,"epoch":1,"node":""}'],
    "restart-empty-node": ['{"op":"restart","node":""}'],
    "restart-unknown-node": ['{"op":"restart","node":"zz"}', '{"op":"state"}'],
    "expect-unknown-key": ['{"op":"state","expect":{"x":1}}'],
    "expect-not-an-object": ['{"op":"state","expect":[]}'],
    "expect-step-and-op": [
        '{"op":"restart","expect":{"step":1,"op":"restart"}}',
        '{"op":"restart","expect":{"op":"state"}}',
    ],
    "mismatch-echoes-floats-and-unicode": [
        '{"op":"state","expect":{"inactive_epoch":1.5,"max_applied_epoch":"\u00e9","step":2}}'
    ],
    "lrlo-below-minus-one": ['{"op":"apply_reconciled","lrlo":-2}'],
    "lro-only-moves-lro": ['{"op":"apply_reconciled","lrlo":-1,"lro":5}', '{"op":"state"}'],
    # --- log order ---
    "offset-equal-to-lrlo": [
        '{"op":"apply_reconciled","lrlo":3}',
        '{"op":"apply_placeholder","epoch":5,"offset":3}',
    ],
    "lrlo-past-the-last-apply": [
        A5,
        '{"op":"apply_reconciled","lrlo":10}',
        '{"op":"apply_placeholder","epoch":6,"offset":5}',
    ],
    "rejected-placeholder-takes-its-offset": [
        A5,
        '{"op":"apply_placeholder","epoch":9,"offset":1}',
        '{"op":"apply_placeholder","epoch":2,"offset":5}',
        '{"op":"apply_placeholder","epoch":9,"offset":4}',
    ],
    "noop-advance-takes-its-offset": [
        A5,
        '{"op":"apply_advance_epoch","epoch":2,"offset":5}',
        '{"op":"apply_placeholder","epoch":9,"offset":4}',
    ],
    # --- deletion ---
    "deleted-applies-skip-the-order-check": [
        '{"op":"apply_placeholder","epoch":5,"offset":3}',
        '{"op":"delete_partition"}',
        '{"op":"apply_placeholder","epoch":5,"offset":1}',
        '{"op":"apply_placeholder","epoch":5,"offset":1}',
    ],
    "offsets-restart-after-create": [
        '{"op":"delete_partition"}',
        '{"op":"apply_placeholder","epoch":5,"offset":4}',
        '{"op":"create_partition"}',
        '{"op":"apply_placeholder","epoch":5,"offset":2}',
    ],
    "deleted-still-type-checks": [
        '{"op":"delete_partition"}',
        '{"op":"fence","term":-1,"epoch":1}',
    ],
    "deleted-reconciled-still-type-checks": [
        '{"op":"delete_partition"}',
        '{"op":"apply_reconciled","lrlo":-2}',
    ],
    "delete-twice": ['{"op":"delete_partition"}', '{"op":"delete_partition"}'],
    "create-existing": ['{"op":"create_partition"}'],
    "restart-one-node-keeps-the-others": [
        '{"op":"fence","term":1,"epoch":5,"node":"n0"}',
        '{"op":"fence","term":1,"epoch":9,"node":"n1"}',
        '{"op":"restart","node":"n0"}',
        '{"op":"fence","term":1,"epoch":6,"node":"n1"}',
        '{"op":"fence","term":1,"epoch":4,"node":"n0"}',
    ],
    "restart-while-deleted": [
        '{"op":"fence","term":1,"epoch":5}',
        '{"op":"delete_partition"}',
        '{"op":"restart","node":"n0"}',
        '{"op":"state"}',
    ],
    # --- gc_epoch ---
    "report-extra-key": [
        '{"op":"gc_epoch","snapshot_revision":5,"partitions":[],'
        '"reports":[{"partition":"a","replica":"r","inactive_epoch":1,"x":1}]}'
    ],
    "report-outside-snapshot-still-checked": [
        '{"op":"gc_epoch","snapshot_revision":5,"partitions":[],'
        '"reports":[{"partition":"a","replica":"r","inactive_epoch":-2}]}'
    ],
    "duplicate-replica-report-even-if-null": [
        '{"op":"gc_epoch","snapshot_revision":5,"partitions":["a"],"reports":[{"partition":"a",'
        '"replica":"r","inactive_epoch":null},{"partition":"a","replica":"r","inactive_epoch":3}]}'
    ],
    "partition-not-a-string": [
        '{"op":"gc_epoch","snapshot_revision":5,"partitions":[1],"reports":[]}'
    ],
    "duplicate-partition": [
        '{"op":"gc_epoch","snapshot_revision":5,"partitions":["a","a"],"reports":[]}'
    ],
    "M-below-minus-one": ['{"op":"gc_eligible","key":"x","age_s":0,"M":-2,"grace_s":0}'],
    # --- keys ---
    "key-trailing-newline": [
        f'{{"op":"gc_eligible","key":"{KEY1}\\n","age_s":0,"M":5,"grace_s":0}}'
    ],
    "key-unicode-digit": [
        '{"op":"gc_eligible","key":"level_zero/data/000/00000000000000000\\u0665/a","age_s":0,"M":5,"grace_s":0}'
    ],
    "key-name-129-chars": [
        f'{{"op":"gc_eligible","key":"{KEY1}{"b" * 128}","age_s":0,"M":5,"grace_s":0}}'
    ],
    "key-name-128-chars": [
        f'{{"op":"gc_eligible","key":"{KEY1}{"b" * 127}","age_s":0,"M":5,"grace_s":0}}'
    ],
    "key-name-leading-dot": [
        '{"op":"gc_eligible","key":"level_zero/data/000/000000000000000001/.a","age_s":0,"M":5,"grace_s":0}'
    ],
    "negative-zero-age": ['{"op":"gc_eligible","key":"x","age_s":-0.0,"M":5,"grace_s":0}'],
}

# Per variant: the spec's open questions about the variants (each answered by the model).
VARIANT_PROGRAMS: dict[str, list[str]] = {
    "collapse-fresh-node-collapses": [
        "# variant: collapse",
        A5,
        '{"op":"apply_placeholder","epoch":6,"offset":1}',
        '{"op":"fence","term":1,"epoch":8,"node":"n1"}',
        '{"op":"fence","term":1,"epoch":7,"node":"n1"}',
    ],
    "collapse-first-slide-not-first-fence": [
        "# variant: collapse",
        '{"op":"fence","term":1,"epoch":5}',
        A5,
        '{"op":"apply_placeholder","epoch":8,"offset":1}',
        '{"op":"restart"}',
        '{"op":"fence","term":1,"epoch":6}',
        '{"op":"fence","term":1,"epoch":9}',
        '{"op":"fence","term":1,"epoch":10}',
    ],
    "strict-advance-collapses": [
        "# variant: strict",
        A5,
        '{"op":"apply_advance_epoch","epoch":7,"offset":1}',
        '{"op":"state"}',
    ],
    "strict-seen-below-applied": [
        "# variant: strict",
        '{"op":"fence","term":1,"epoch":5}',
        '{"op":"apply_placeholder","epoch":9,"offset":0}',
        '{"op":"fence","term":1,"epoch":7}',
        '{"op":"fence","term":1,"epoch":9}',
        '{"op":"fence","term":2,"epoch":10}',
    ],
    "fence-only-upper-end-from-seen": [
        "# variant: fence-only",
        '{"op":"fence","term":1,"epoch":5}',
        A5,
        '{"op":"apply_placeholder","epoch":9,"offset":1}',
        '{"op":"fence","term":2,"epoch":6}',
        '{"op":"fence","term":1,"epoch":7}',
        '{"op":"fence","term":2,"epoch":10}',
        '{"op":"fence","term":1,"epoch":8}',
    ],
    "untermed-upper-end-from-seen": [
        "# variant: untermed",
        '{"op":"fence","term":1,"epoch":5}',
        A5,
        '{"op":"apply_placeholder","epoch":9,"offset":1}',
        '{"op":"fence","term":2,"epoch":6}',
        '{"op":"fence","term":1,"epoch":10}',
    ],
    "uncapped-empty-snapshot": [
        "# variant: uncapped",
        '{"op":"gc_epoch","snapshot_revision":5,"partitions":[],"reports":[]}',
    ],
    "skip-missing-empty-and-partly-missing": [
        "# variant: skip-missing",
        '{"op":"gc_epoch","snapshot_revision":5,"partitions":[],"reports":[]}',
        '{"op":"gc_epoch","snapshot_revision":5,"partitions":["a","b"],'
        '"reports":[{"partition":"a","replica":"r","inactive_epoch":9}]}',
    ],
    "empty-is-nothing-still-blocks": [
        "# variant: empty-is-nothing",
        '{"op":"gc_epoch","snapshot_revision":5,"partitions":["a"],"reports":[]}',
    ],
    "watermark-before-any-apply": [
        "# variant: watermark-from-max",
        '{"op":"state"}',
        A5,
        '{"op":"apply_reconciled","lrlo":0}',
    ],
}

# Files as bytes: encoding, line breaks and white space as `epochgc replay` reads them
# (UTF-8 without BOM, Python's universal newlines, lines stripped as by str.strip()).
_S = b'{"op":"state"}'

# VECTORS.md "Files": a line holds at most 2^20 characters (code points), its end of line
# (\n, \r\n or \r) counted as one.
LINE_BOUND = 1 << 20


def _long_step(chars: int, end: bytes) -> bytes:
    """A `state` step of `chars` code points before its end of line, padded with characters
    of 2 and 4 UTF-8 bytes (one code point each; the second is two UTF-16 units in Node)."""
    head, tail = '{"op":"state","note":"', '"}'
    fill = chars - len(head) - len(tail)
    return (head + ("\u00e9\U0001f600" * (fill // 2 + 1))[:fill] + tail).encode() + end
RAW_FILES: dict[str, bytes] = {
    "bom-is-malformed": b"\xef\xbb\xbf# variant: strict\n" + A5.encode() + b"\n",
    "invalid-utf8-is-unreadable": _S + b"\n\xff\n",
    # Named by line (after a \r\n) and column (bytes, a 2-byte character before it).
    "invalid-utf8-mid-line": _S + b"\r\n" + b'{"op":"st\xc3\xa9\xfeate"}\n',
    "cr-alone-ends-a-line": _S + b"\r" + _S + b"\n",
    "crlf-ends-a-line": _S + b"\r\n" + _S + b"\r\n",
    "no-final-newline": _S,
    "file-separator-is-white-space": b"\x1c\n" + _S + b"\n",
    "vertical-tab-is-white-space": b"\x0b\n" + _S + b"\n",
    "nel-is-white-space": b"\xc2\x85\n" + _S + b"\n",
    "line-separator-is-white-space": b"\xe2\x80\xa8\n" + _S + b"\n",
    "nbsp-before-a-step-is-stripped": b"\xc2\xa0" + _S + b"\xc2\xa0\n",
    "line-separator-inside-a-string": b'{"op":"state","note":"\xe2\x80\xa8"}\n',
    "only-comments": b"# variant: strict\n# nothing else\n",
    "empty-file": b"",
    "line-at-the-bound": _S + b"\n" + _long_step(LINE_BOUND - 1, b"\n") + _S + b"\n",
    "line-over-the-bound": _S + b"\n" + _long_step(LINE_BOUND, b"\n") + _S + b"\n",
    "crlf-line-at-the-bound": _long_step(LINE_BOUND - 1, b"\r\n") + _S + b"\r\n",
    "crlf-line-over-the-bound": _S + b"\r\n" + _long_step(LINE_BOUND, b"\r\n"),
    "cr-line-over-the-bound": _S + b"\r" + _long_step(LINE_BOUND, b"\r") + _S,
    "last-line-at-the-bound": _S + b"\n" + _long_step(LINE_BOUND, b""),
    "last-line-over-the-bound": _S + b"\n" + _long_step(LINE_BOUND + 1, b""),
}
