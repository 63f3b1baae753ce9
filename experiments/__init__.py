"""Reproducible experiments on the implementation's deterministic simulation mode.

`python -m epochgc.experiments [--quick] [--out docs/]` runs every experiment with fixed seeds and
writes one PNG per figure plus `experiments.md` (a table per experiment) into `--out`.

- `experiments.windows`: why windows (strict vs collapse vs reference fencing).
- `experiments.gccost`: what GC costs (retained garbage against the ideal).
"""
