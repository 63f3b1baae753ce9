"""Deliberately broken ports for `epochgc conform`: each runs the model adapter
(`model.port`) with ONE planted bug, patched in before it serves. Run one as
`python -m tests.conform.ports.NAME` from the repository root."""
