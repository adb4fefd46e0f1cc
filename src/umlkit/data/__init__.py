"""umlkit.data: real-format loaders, UML-Mini, samplers and transforms."""
from umlkit.data.datasets import DATASETS, DatasetCountError, ImageListDataset, load_dataset, read_annotations
from umlkit.data.mini import SOURCES, ensure_mini, make_mini, mini_table, pretraining_set

__all__ = ["DATASETS", "DatasetCountError", "ImageListDataset", "SOURCES", "ensure_mini", "load_dataset",
           "make_mini", "mini_table", "pretraining_set", "read_annotations"]
