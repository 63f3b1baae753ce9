"""`python -m epochgc`: the `epochgc` command."""

from epochgc.impl.cli import main

main()
