"""Several replicas over Redis (relay.md §12.4): the bus, its wire format and presence
in Redis."""
