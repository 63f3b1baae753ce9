"""The real system: a sans-IO Raft core and hosts, partitions, the produce path, the
reconciler, the epoch service, object storage and the PySpark GC job."""
