"""Planted bug: the key parser accepts any digits for the prefix and epoch and any name, so
a malformed key gets an epoch and can be collected (spec R20-R21)."""

import re

from epochgc.model import keys, port

keys._KEY = re.compile(r"level_zero/data/([0-9]+)/([0-9]+)/(.+)")
port.main()
