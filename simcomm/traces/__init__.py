"""Per-layer compute traces: schema, files, capture (torch, lazily), import and synthesis."""

from simcomm.traces.schema import CAPTURE_METHODS, SCHEMA_VERSION, Layer, Trace

__all__ = ["CAPTURE_METHODS", "SCHEMA_VERSION", "Layer", "Trace"]
