"""`python -m epochgc`: the `epochgc` command."""

from epochgc.impl.entry import main

main()
