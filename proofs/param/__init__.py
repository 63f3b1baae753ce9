"""The parameterized proof (spec P3): the design as quantified formulas over any number
of writes, objects, partitions and replicas (`spec.py`), proved inductive with Z3
(`prove.py`), and checked against the Python model on small universes (`correspond.py`).
The runner takes `tasks.jobs()`."""
