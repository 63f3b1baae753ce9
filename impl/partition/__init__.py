"""One partition as a Raft group: log entry encoding, the window state machine applied with
the model's functions, the asyncio reader/writer lock and the leader's fence."""
