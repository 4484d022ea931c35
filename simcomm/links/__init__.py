"""Link-class presets, one module per family, and user link files.

Importing this package registers every preset in :data:`LINKS`; see
docs/links.md for the rule behind each number (peak vs NCCL-effective).
"""

# Imported for their side effect (registration), in the order `simcomm list links` shows.
from simcomm.links import nvlink, pcie, infiniband, roce, ethernet, cloud, aries, shm, host  # noqa: F401, I001
from simcomm.links.base import LINKS, LinkClass, define, link_class
from simcomm.links.toml_file import load_link_file, parse_link_table

__all__ = ["LINKS", "LinkClass", "define", "link_class", "load_link_file", "parse_link_table"]
