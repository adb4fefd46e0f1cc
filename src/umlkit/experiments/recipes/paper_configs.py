"""One loader for the papers' configuration files, ``configs/<folder>/<file>`` (the YAML files are the single source
of run settings: recipes, method blocks, grids, chosen rates). Every paper package and shared recipe reads through
here instead of keeping its own copy of the folder lookup and the parsing.

Written by hand: PyYAML parses; this adds the repository lookup, a parse cached per process (a chapter builds
thousands of record keys from the same files), YAML 1.1's scientific-notation strings read as floats where a file
asks for it (:func:`umlkit.train.config.coerce_numbers`), and errors that name the file.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

from umlkit._paths import repo_folder
from umlkit._yaml import read_yaml as read_yaml_file

__all__ = ["config_dir", "read_yaml", "base_config"]


def config_dir(folder: str) -> Path:
    """``configs/<folder>/`` of the checkout (an error naming it when absent)."""
    return repo_folder("configs", folder, what=f"the {folder} configurations")


@lru_cache(maxsize=32)
def read_yaml(folder: str, name: str, numbers: bool = False) -> dict:
    """``configs/<folder>/<name>`` parsed once per process; ``numbers``: strings such as ``1e-4`` become floats.
    Callers must not mutate the returned mapping."""
    path = config_dir(folder) / name
    try:
        data = read_yaml_file(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is missing: the {folder} experiments read their settings from it") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    if numbers:
        from umlkit.train.config import coerce_numbers
        data = coerce_numbers(data)
    return data if data is not None else {}


@lru_cache(maxsize=16)
def base_config(folder: str, name: str, profile: str) -> dict:
    """A run configuration file of ``configs/<folder>/`` resolved for ``profile`` (:func:`umlkit.train.config.
    load_config`), once per process; callers copy it before changing it."""
    from umlkit.train.config import load_config
    return load_config(config_dir(folder) / name, profile)
