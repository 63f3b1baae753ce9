"""`python -m epochgc.impl.gc --store URL ...`: the same command as `epochgc gc`."""

from epochgc.impl.gc.cli import gc

if __name__ == "__main__":
    gc(prog_name="epochgc gc")
