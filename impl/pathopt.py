"""A path option that refuses an empty value.

newuser14 (R5's neighbours): `click.Path` takes `''`, and an empty path then resolves as the
current directory (`pathlib.Path('')` is `.`): `cluster start --data-dir ''` started a
three-node cluster in the directory the command ran from, `gc-package --out ''` wrote its
package there, `gc --manifest ''` was refused as "/current/dir already exists". POSIX
says an empty path names nothing ("A null pathname shall not be successfully resolved",
XBD 4.13 Pathname Resolution; open(2): ENOENT "if path points to an empty string"), so a
value given empty is a usage error (64) naming the option, as `gc-admin pause --by ''` is;
`.` names the current directory.
"""

from __future__ import annotations

from typing import Any

import click


class Path(click.Path):
    """`click.Path` that refuses `''` (see the module's docstring)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value == "":
            self.fail("the path is empty; give one ('.' for the current directory)",
                      param, ctx)
        return super().convert(value, param, ctx)
