"""`python -m impl.gc --store URL ...`: the same command as `epochgc gc`."""

from impl.gc.cli import gc

if __name__ == "__main__":
    gc(prog_name="epochgc gc")
