"""Link-class presets, one module per family, and user link files.

Importing this package registers every preset in :data:`LINKS`; see
docs/links.md for the rule behind each number (peak vs NCCL-effective).
"""

from simcomm.links.base import LINKS, LinkClass, define, link_class
from simcomm.links.toml_file import load_link_file, parse_link_table
from simcomm.registry import scan as _scan

# Every family module registers its presets on import (define); the package scans itself.
_scan(__name__, skip=("base", "toml_file"))

__all__ = ["LINKS", "LinkClass", "define", "link_class", "load_link_file", "parse_link_table"]
