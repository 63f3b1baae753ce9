"""Operating a cluster: broker processes, their RPC, the local cluster manager, the GC round
used by the demo, and the CLI commands."""
