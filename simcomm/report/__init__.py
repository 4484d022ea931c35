"""simcomm.report (see docs/architecture.md)."""
