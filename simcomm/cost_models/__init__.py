"""simcomm.cost_models (see docs/architecture.md)."""
