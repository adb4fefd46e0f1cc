"""umlkit: the library behind the umlkit reproduction book for deep metric learning.

Layers (each a subpackage): ``umlkit.data`` -> ``umlkit.models`` -> ``umlkit.losses`` -> ``umlkit.train`` ->
``umlkit.metrics`` -> ``umlkit.experiments``; the chapters in ``book/`` call into them.
"""
from umlkit._env import check_at_import
from umlkit._paths import data_root, repo_root, results_root

check_at_import()   # environment variables umlkit cannot use are refused here, before anything runs

__version__ = "0.1.0"
__all__ = ["__version__", "data_root", "repo_root", "results_root"]
