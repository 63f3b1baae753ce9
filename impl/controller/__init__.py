"""The controller Raft group: revision counter, epoch minting, the partition table; the
broker-side epoch cache and the snapshot publisher."""
