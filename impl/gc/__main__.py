"""`python -m epochgc.impl.gc --store URL ...`: the same command as `epochgc gc`, ended as
the `epochgc` entry point ends it (a round a signal interrupted ends by that signal)."""

from epochgc.impl import entry

if __name__ == "__main__":
    entry.register_first()  # before the command's imports register theirs: runs last
    from epochgc.impl.gc.cli import gc

    entry.run(lambda: gc(prog_name="epochgc gc"))
