"""umlkit.train: ``fit(config)``, checkpoints, evaluation of models, configs."""
from umlkit.data.side_info import load_class_embeddings, save_class_embeddings, write_split_file
from umlkit.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from umlkit.train.config import DEFAULTS, apply_overrides, load_config, resolve_config
from umlkit.train.engine import FitResult, TrainingDivergedError, fit, param_groups, plot_history, read_log, run_dir_for
from umlkit.train.evaluate import evaluate_model, extract_embeddings

__all__ = ["CheckpointError", "DEFAULTS", "FitResult", "TrainingDivergedError", "apply_overrides", "evaluate_model",
           "extract_embeddings", "fit", "load_checkpoint", "load_config", "param_groups", "plot_history", "read_log",
           "resolve_config", "run_dir_for", "save_checkpoint", "load_class_embeddings", "save_class_embeddings",
           "write_split_file"]
