"""`epochgc chaos`: the real multi-process cluster under a seeded nemesis (Jepsen-style, on
loopback), then independent checks. See impl/chaos/run.py."""
