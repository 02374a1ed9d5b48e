"""What the modules above share and none of them owns (Canal's ``canal.common``): Canal's
ZooKeeper paths, durable file writes and the periodic flush of the persisted managers."""
