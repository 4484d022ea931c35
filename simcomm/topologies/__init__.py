"""simcomm.topologies (see docs/architecture.md)."""
