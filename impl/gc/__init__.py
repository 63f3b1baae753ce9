"""The PySpark L0 garbage-collection job: reports -> M -> list on executors -> delete."""
