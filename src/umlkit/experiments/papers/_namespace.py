"""One namespace over a paper package's ``config`` and ``chapter`` modules (PEP 562 module ``__getattr__``): a
chapter reads ``puma.run_config`` and ``puma.table2_facts`` alike, while nothing but a chapter imports chapter.py."""
from __future__ import annotations

import importlib

__all__ = ["chapter_attribute"]


def chapter_attribute(package: str, config, name: str):
    """``config.<name>``, else ``<package>.chapter.<name>``; else the AttributeError Python would raise."""
    if name.startswith("__"):
        raise AttributeError(name)
    if hasattr(config, name):
        return getattr(config, name)
    chapter = importlib.import_module(f"{package}.chapter")
    if hasattr(chapter, name):
        return getattr(chapter, name)
    raise AttributeError(f"module {package!r} has no attribute {name!r} (neither config.py nor chapter.py defines it)")
