"""The whole cluster in one process on the Raft simulator, deterministic for a seed."""
