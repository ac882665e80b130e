"""The lake store: Delta tables through delta-rs, snapshots and the catalog."""
