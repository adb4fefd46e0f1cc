"""Building blocks of the parameter-efficient methods (one concern per file, re-exported flat)."""
from umlkit.models.layers.accumulators import ACCUMULATORS, build_accumulator
from umlkit.models.layers.adapter import Adapter, AdaptFormerAdapter, puma_adapter_pair
from umlkit.models.layers.lora import LoRAQKV
from umlkit.models.layers.prompt_pool import PromptPool

__all__ = ["ACCUMULATORS", "AdaptFormerAdapter", "Adapter", "LoRAQKV", "PromptPool", "build_accumulator",
           "puma_adapter_pair"]
