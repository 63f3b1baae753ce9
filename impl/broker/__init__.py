"""A broker: one Raft host with the controller replica and its partition replicas, plus the
produce path, reconciler, housekeeper and health reporter that run on it."""
