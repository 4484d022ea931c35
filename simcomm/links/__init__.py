"""Link-class presets, one module per family, and user link files."""

from simcomm.links.base import LINKS, LinkClass, define, link_class

__all__ = ["LINKS", "LinkClass", "define", "link_class"]
