"""umlkit.data: real-format loaders, UML-Mini, samplers and transforms."""
from umlkit.data.check import CorruptImagesError, check_datasets, verify_images
from umlkit.data.datasets import DATASETS, DatasetCountError, ImageListDataset, load_dataset, read_annotations
from umlkit.data.decode import to_rgb
from umlkit.data.mini import SOURCES, chapter_root, ensure_mini, make_mini, mini_table, pretraining_set
from umlkit.data.samplers import SAMPLERS, build_sampler, few_shot_indices
from umlkit.data.transforms import TRANSFORMS, build_transforms
from umlkit.data.unified import PUMA_ORDER, UnifiedDataset, load_unified

__all__ = ["DATASETS", "CorruptImagesError", "DatasetCountError", "ImageListDataset", "PUMA_ORDER", "SAMPLERS",
           "SOURCES", "TRANSFORMS", "UnifiedDataset", "build_sampler", "build_transforms", "check_datasets",
           "ensure_mini", "chapter_root", "few_shot_indices", "load_dataset", "load_unified", "make_mini", "mini_table",
           "pretraining_set", "read_annotations", "to_rgb", "verify_images"]
