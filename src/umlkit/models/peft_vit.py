"""A forward pass over a timm ``VisionTransformer``'s own modules with parameter-efficient insertions.

The backbone is timm's (patch embedding, blocks, norms are called, never rewritten); this module only decides
what enters each block and what is added beside it:

* **prompt pool** (PUMA, Sec. 4.2; official ``forward_features``): query from the patch embeddings before the
  CLS token and position embeddings, detached; the pooled prompt goes right after CLS at the input with the
  CLS position embedding added (PUMA extends pos_embed by copying the CLS entry); token order
  [CLS, prompts, patches]; prompts stay through all blocks.
* **shallow VPT** (Jia et al., ECCV 2022): learnable tokens after CLS at the input, no position embedding.
* **deep VPT** (VPTSP layout, ``_forward_vpt_block``): before block i, N_i = max(N - i * step, 0) fresh tokens
  are *prepended* ([prompts, CLS, patches]) and dropped after the block. The same path carries VPTSP's
  per-sample class prompts in its proxy pass.
* **adapters** parallel to MSA and MLP with the block's own LayerNorm output as input (PUMA Eq. 3-4):
  x' = x + MSA(LN1 x) + A0(LN1 x); x'' = x' + MLP(LN2 x') + A1(LN2 x'); under autocast each LayerNorm output is
  cast to bf16/fp16 once for both of its readers (:meth:`PEFTViT._cast_once`);
* **AdaptFormer** parallel to the MLP with the residual stream as input: x'' = x' + (MLP(LN2 x') + A(x'))
  (AdaptFormer's and VPTSP's), or with the MLP's LayerNorm output, A(LN2 x') (PUMA's ``AdaptFormer``); on the
  first L blocks or (VPTSP's ``_setup_adapter``) the last L.
* **LoRA** replaces ``attn.qkv`` by :class:`umlkit.models.layers.LoRAQKV` (done by the factory).

With zero up-projections, zero LoRA B and no prompts the result equals timm's ``forward_features`` + pooling
bit for bit on CPU fp32 (tested).

**Memory-light mode** (``checkpoint_blocks = True``, or an int k for the first k blocks only): in training, each
such block (with its insertions) runs under
``torch.utils.checkpoint`` (non-reentrant, RNG state preserved so stochastic adapters draw the same masks when the
block is recomputed): only block inputs are kept for the backward pass, at the price of a second forward of each
block. A frozen backbone saves the weight gradients, which pays for most of that recomputation; the gradients are
those of the plain forward (tested).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from umlkit.models.layers import AdaptFormerAdapter, PromptPool, puma_adapter_pair

__all__ = ["PEFTViT"]


class PEFTViT(nn.Module):
    def __init__(
        self,
        vit: nn.Module,
        *,
        adapter_keep_prob: float | None = None,
        adapter_bottleneck: int = 128,
        adapter_scale: float = 0.1,
        adapter_skip_dropped: bool = False,
        adaptformer_bottleneck: int | None = None,
        adaptformer_layers: int | None = None,
        adaptformer_input: str = "stream",
        adaptformer_last: bool = False,
        adaptformer_scale: float = 0.1,
        adaptformer_ln: str = "none",
        prompt_pool: PromptPool | None = None,
        shallow_prompts: int = 0,
        deep_prompts: Sequence[int] | None = None,
    ):
        super().__init__()
        if not hasattr(vit, "blocks") or not hasattr(vit, "patch_embed"):
            raise TypeError(f"{type(vit).__name__} is not a timm VisionTransformer; parameter-efficient ViT methods "
                            "need one (ResNets support zero_shot, full, linear, mlp3 and bitfit)")
        self.vit = vit
        dim, depth = vit.embed_dim, len(vit.blocks)
        self.dim = dim
        self.adapters_attn = self.adapters_mlp = None
        if adapter_keep_prob is not None:
            pairs = [puma_adapter_pair(dim, adapter_bottleneck, adapter_scale, adapter_keep_prob, adapter_skip_dropped)
                     for _ in range(depth)]
            self.adapters_attn = nn.ModuleList(p[0] for p in pairs)
            self.adapters_mlp = nn.ModuleList(p[1] for p in pairs)
        self.adaptformer = None
        if adaptformer_bottleneck is not None:
            n = depth if adaptformer_layers is None else adaptformer_layers
            if not 1 <= n <= depth:
                raise ValueError(f"adaptformer_layers must be in [1, {depth}], got {n}")
            if adaptformer_input not in ("stream", "norm"):
                raise ValueError(f"adaptformer_input must be 'stream' or 'norm', got {adaptformer_input!r}")
            self.adaptformer = nn.ModuleList(AdaptFormerAdapter(dim, adaptformer_bottleneck, adaptformer_scale,
                                                                adaptformer_ln) for _ in range(n))
            self.adaptformer_first = depth - n if adaptformer_last else 0   # the first block with an adapter
            self.adaptformer_norm = adaptformer_input == "norm"
        self.prompt_pool = prompt_pool
        self.shallow = None
        if shallow_prompts:
            self.shallow = nn.Parameter(torch.empty(1, shallow_prompts, dim))
            nn.init.xavier_uniform_(self.shallow.view(shallow_prompts, dim))
        self.deep = None
        if deep_prompts is not None:
            if len(deep_prompts) > depth:
                raise ValueError(f"{len(deep_prompts)} prompt layers for a {depth}-block ViT")
            self.deep = nn.ParameterList()
            for n in deep_prompts:
                p = nn.Parameter(torch.empty(1, n, dim))
                if n:
                    nn.init.xavier_normal_(p)   # on the (1, n, dim) tensor, as VPTSP's _setup_prompt
                self.deep.append(p)
        self.last_prompt_weights: torch.Tensor | None = None
        self.checkpoint_blocks: bool | int = False

    # ------------------------------------------------------------------------------------------ pieces
    def _block(self, i: int, blk: nn.Module, x: torch.Tensor) -> torch.Tensor:
        h = self._cast_once(blk.norm1(x))
        x = x + blk.drop_path1(blk.ls1(blk.attn(h)))
        if self.adapters_attn is not None:
            x = self.adapters_attn[i].add_to(x, h)
        h = self._cast_once(blk.norm2(x))
        branch = blk.drop_path2(blk.ls2(blk.mlp(h)))
        j = i - self.adaptformer_first if self.adaptformer is not None else -1
        if 0 <= j < len(self.adaptformer or ()):
            branch = branch + self.adaptformer[j](h if self.adaptformer_norm else x)
        x = x + branch
        if self.adapters_mlp is not None:
            x = self.adapters_mlp[i].add_to(x, h)
        return x

    def _cast_once(self, h: torch.Tensor) -> torch.Tensor:
        """A LayerNorm output that two layers read (the block's and its PUMA adapter's), cast to the autocast dtype
        once instead of by each reader; autocast leaves LayerNorm in fp32. Without adapters, or without
        autocast, ``h`` as it is."""
        device = h.device.type
        if self.adapters_attn is None or h.dtype != torch.float32 or not torch.is_autocast_enabled(device):
            return h
        return h.to(torch.get_autocast_dtype(device))

    def _pool(self, x: torch.Tensor, n_prefix: int) -> torch.Tensor:
        vit = self.vit
        if vit.global_pool == "avg":
            feat = x[:, n_prefix:].mean(dim=1)
        elif vit.global_pool in ("token", ""):
            feat = x[:, 0]
        else:
            raise ValueError(f"global_pool={vit.global_pool!r} is not supported by the PEFT forward")
        return vit.fc_norm(feat)

    def forward_features(
        self,
        x: torch.Tensor,
        layer_prompts: Sequence[torch.Tensor | None] | None = None,
        use_task_prompts: bool = True,
    ) -> torch.Tensor:
        """Pooled feature (B, D).

        Args:
            x: images (B, 3, H, W).
            layer_prompts: per-block (B, n_i, D) tokens to prepend before block i and drop after it, used for
                VPTSP's class prompts; replaces the task's deep prompts when given.
            use_task_prompts: insert this model's own prompts (False in VPTSP's proxy pass).
        """
        vit = self.vit
        tokens = vit.patch_embed(x)
        b = tokens.shape[0]
        pooled = None
        if use_task_prompts and self.prompt_pool is not None:
            flat = tokens.reshape(b, -1, tokens.shape[-1])
            query = ((flat.mean(dim=1) + flat.amax(dim=1)) / 2).detach()
            pooled, weights = self.prompt_pool(query)
            self.last_prompt_weights = weights.detach()
        tokens = vit._pos_embed(tokens)
        n_prefix = vit.num_prefix_tokens
        inserted = []
        if pooled is not None:
            cls_pos = vit.pos_embed[:, :1] if (vit.pos_embed is not None and not vit.no_embed_class) else 0
            inserted.append(pooled + cls_pos)
        if use_task_prompts and self.shallow is not None:
            inserted.append(self.shallow.expand(b, -1, -1))
        if inserted:
            tokens = torch.cat([tokens[:, :n_prefix], *inserted, tokens[:, n_prefix:]], dim=1)
            n_prefix += sum(t.shape[1] for t in inserted)
        tokens = vit.patch_drop(tokens)
        tokens = vit.norm_pre(tokens)
        if layer_prompts is None and use_task_prompts and self.deep is not None:
            layer_prompts = [p.expand(b, -1, -1) if p.shape[1] else None for p in self.deep]
        light = self.checkpoint_blocks if self.training and torch.is_grad_enabled() else 0
        n_light = len(vit.blocks) if light is True else int(light)
        for i, blk in enumerate(vit.blocks):
            extra = layer_prompts[i] if layer_prompts is not None and i < len(layer_prompts) else None
            if extra is not None and extra.shape[1]:
                n = extra.shape[1]
                tokens = torch.cat([extra, tokens], dim=1)
            else:
                n = 0
            if i < n_light:
                from torch.utils.checkpoint import checkpoint
                tokens = checkpoint(self._block, i, blk, tokens, use_reentrant=False)
            else:
                tokens = self._block(i, blk, tokens)
            if n:
                tokens = tokens[:, n:]
        tokens = vit.norm(tokens)
        return self._pool(tokens, n_prefix)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_features(x)
