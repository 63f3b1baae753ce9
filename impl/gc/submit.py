"""spark-submit entry point: `spark-submit [--master URL] impl/gc/submit.py --store ...`.

Same options as `epochgc gc`; the master comes from spark-submit unless --master is given.
"""

import os
import sys

if __name__ == "__main__":
    # spark-submit runs this file as a script: make the repository importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from impl.gc.cli import gc

    gc(prog_name="epochgc gc")
