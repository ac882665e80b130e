"""Quality gates that decide whether a parsed table enters the lake or is quarantined."""
