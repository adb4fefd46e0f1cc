"""umlkit.models: timm backbones + the parameter-efficient methods the papers compare, one factory."""
from umlkit.models._factory import (
           METHODS,
           count_trainable,
           create_model,
           method_entry,
           parameter_budget,
           register_method,
)
from umlkit.models.backbones import BACKBONES, create_backbone, data_config
from umlkit.models.embedding import HEADS, EmbeddingModel
from umlkit.models.peft_vit import PEFTViT
from umlkit.models.vptsp import PROXY_SOURCES, VPTSPModel

__all__ = ["BACKBONES", "HEADS", "METHODS", "PROXY_SOURCES", "EmbeddingModel", "PEFTViT", "VPTSPModel",
           "count_trainable", "create_backbone", "create_model", "data_config", "method_entry", "parameter_budget",
           "register_method"]
