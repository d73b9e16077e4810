"""Change data capture: pgoutput decoding, the replication stream and the applier."""
