"""umlkit.models: timm backbones + the parameter-efficient methods the papers compare, one factory.

A method of one's own is registered with :func:`register_method` and built from the public builder API the
built-in methods use: :class:`MethodBuild` (what a builder receives), :func:`pop_options` (its options),
:func:`build_body` (the backbone, or a :class:`PEFTViT` around it) and :func:`finish` (the head and the
:class:`EmbeddingModel`); ``configs/examples/plugin_method.py`` is an example.
"""
from umlkit.models._factory import (
           METHODS,
           MethodBuild,
           build_body,
           count_trainable,
           create_model,
           finish,
           method_entry,
           parameter_budget,
           pop_options,
           register_method,
)
from umlkit.models.backbones import BACKBONES, create_backbone, data_config
from umlkit.models.embedding import HEADS, EmbeddingModel
from umlkit.models.peft_vit import PEFTViT
from umlkit.models.vptsp import PROXY_SOURCES, VPTSPModel

__all__ = ["BACKBONES", "HEADS", "METHODS", "PROXY_SOURCES", "EmbeddingModel", "MethodBuild", "PEFTViT", "VPTSPModel",
           "build_body", "count_trainable", "create_backbone", "create_model", "data_config", "finish", "method_entry",
           "parameter_budget", "pop_options", "register_method"]
