"""A path option: refuses an empty value, and a directory where a file is wanted (or a
file where a directory is), in one wording naming the option and what to give.

newuser14 (R5's neighbours): `click.Path` takes `''`, and an empty path then resolves as the
current directory (`pathlib.Path('')` is `.`): `cluster start --data-dir ''` started a
three-node cluster in the directory the command ran from, `gc-package --out ''` wrote its
package there, `gc --manifest ''` was refused as "/current/dir already exists". POSIX
says an empty path names nothing ("A null pathname shall not be successfully resolved",
XBD 4.13 Pathname Resolution; open(2): ENOENT "if path points to an empty string"), so a
value given empty is a usage error (64) naming the option, as `gc-admin pause --by ''` is;
`.` names the current directory.

newuser15 S7: `gc --metrics-file ''` said "the path is empty; give one ('.' for the current
directory)" (a directory, for an option that wants a file) and `--metrics-file .` click's
own "File '.' is a directory.", a second style; `gc --list .` a third ("--list .: is a
directory (a file path is expected)"). Each path option now says what it wants, the same
way: "the path is empty; give WHAT", "'.' is a directory; give WHAT".
"""

from __future__ import annotations

import os
import stat
from typing import Any

import click


class Path(click.Path):
    """`click.Path` worded as the module's docstring says. `give`: what to give, said in
    a refusal (default from file_okay/dir_okay: a file's path, a directory, a path)."""

    def __init__(self, *, file_okay: bool = True, dir_okay: bool = True,
                 give: str | None = None, **kwargs: Any) -> None:
        super().__init__(file_okay=file_okay, dir_okay=dir_okay, **kwargs)
        self.give = give or ("a file's path" if not dir_okay else
                             "a directory ('.' for the current one)" if not file_okay else
                             "a path")

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value == "":
            self.fail(f"the path is empty; give {self.give}", param, ctx)
        if isinstance(value, str) and not (self.allow_dash and value == "-"):
            try:  # followed, as click.Path's own check does (os.stat)
                mode = os.stat(value).st_mode
            except OSError:
                mode = 0
            if stat.S_ISDIR(mode) and not self.dir_okay:
                self.fail(f"{value!r} is a directory; give {self.give}", param, ctx)
            if stat.S_ISREG(mode) and not self.file_okay:
                self.fail(f"{value!r} is a file; give {self.give}", param, ctx)
        return super().convert(value, param, ctx)
