"""VPTSP: visual prompt tuning with semantic proxies (Ren et al., ICLR 2024), as the official
``architectures/peft_vit.py`` builds it (implementation_notes.md §3).

* image branch: VPT-deep task prompts (N_i = max(N - i * step, 0) tokens prepended before block i < depth,
  dropped after it) + BitFit (all backbone biases trainable) + head LayerNorm + Linear, L2-normalised;
* proxy branch (training only): the *same* images through the frozen ViT again with the **class prompts of each
  sample's label** instead of the task prompts (BitFit biases shared), its own LayerNorm + Linear head,
  L2-normalised; the features of each class's k samples update that class's stored row through an accumulator
  (EMA or GRU-ReLU; LSTM/RNN/GRU-tanh/cross-attention for the Table 7 ablation);
* proxies for all classes = alpha * bias + (1 - alpha) * container, where ``container`` is a non-parameter
  (n_classes, E) tensor (xavier-uniform / 8, L2-normalised) whose batch rows carry gradient in the current step
  and is detached afterwards, and ``bias`` is a learnable (n_classes, E) tensor (xavier-uniform / 8;
  ``proxy_bias_init="pml"`` draws it as PML's Proxy-Anchor proxies instead, kaiming-normal with fan_out, for the
  chapter's diagnosis: the loss normalises the proxies, so their initial norm sets how far one optimizer step turns
  them).

Proxy sources of the appendix Table 5: ``"prompt"`` (VPTSP), ``"sample"`` (the image branch's own embeddings
feed the accumulator), ``"encoder"`` (a trainable copy of the image head on the frozen image feature) and
``"fixed_encoder"`` (the same, head frozen at its initial value).

Option ``class_prompts_device="cpu"``: the class prompts live on the CPU (a large-class dataset like SOP or the
UML union) and only the rows of the batch's classes move to the model's device each step, gathered with a sparse
gradient. The training engine trains them with :class:`umlkit.train.sparse.RowSparseOptimizer`
(``sparse_parameters()``): as the official memory bank, only the batch's rows and their optimizer state are updated
(lazy), while prompts kept on the device take the dense optimizer like every other parameter (the official code
without the memory bank). Checkpoints carry them as ``cpu_class_prompts.<layer>`` (rows flattened).
"""
from __future__ import annotations

import torch
from torch import nn

from umlkit.models.embedding import EmbeddingModel, build_head
from umlkit.models.layers import build_accumulator

__all__ = ["VPTSPModel", "PROXY_SOURCES"]

PROXY_SOURCES = ("prompt", "sample", "encoder", "fixed_encoder")


def _xavier_over8(rows: int, cols: int) -> torch.Tensor:
    t = torch.empty(rows, cols)
    nn.init.xavier_uniform_(t)
    return t / 8.0


class VPTSPModel(EmbeddingModel):
    def __init__(
        self,
        backbone: nn.Module,
        backbone_name: str,
        embed_dim: int,
        num_classes: int,
        *,
        class_prompts: int = 3,
        class_prompt_depth: int = 12,
        class_prompt_step: int = 0,
        accumulator: str = "gru_relu",
        proxy_bias_ratio: float = 0.5,
        ema_keep: float = 0.8,
        rnn_dropout: float = 0.0,
        proxy_source: str = "prompt",
        class_prompts_device: str | None = None,
        proxy_bias_init: str = "official",
        data_config: dict | None = None,
    ):
        head = build_head("ln_linear", backbone.dim, embed_dim)
        super().__init__(backbone, head, "vptsp", backbone_name, embed_dim, data_config)
        if num_classes is None or num_classes < 1:
            raise ValueError("vptsp needs num_classes (the number of training classes) to build its proxies")
        if proxy_source not in PROXY_SOURCES:
            raise ValueError(f"proxy_source must be one of {PROXY_SOURCES}, got {proxy_source!r}")
        if proxy_bias_init not in ("official", "pml"):
            raise ValueError(f"proxy_bias_init must be 'official' (xavier-uniform / 8) or 'pml' (kaiming-normal, "
                             f"fan_out, as PML's ProxyAnchorLoss initialises its proxies), got {proxy_bias_init!r}")
        if not 0 <= proxy_bias_ratio <= 1:
            raise ValueError(f"proxy_bias_ratio must be in [0, 1], got {proxy_bias_ratio}")
        self.num_classes = num_classes
        self.alpha = proxy_bias_ratio
        self.proxy_source = proxy_source
        dim, depth = backbone.dim, len(backbone.vit.blocks)
        self.class_prompt_counts = [max(class_prompts - i * class_prompt_step, 0)
                                    for i in range(min(class_prompt_depth, depth))]
        self.class_prompts = None
        self.proxy_head = None
        if proxy_source == "prompt":
            tensors = []
            for n in self.class_prompt_counts:
                t = torch.empty(num_classes, n, dim)
                if n:
                    nn.init.xavier_normal_(t)   # on the 3-D tensor, as the official _setup_prompt
                tensors.append(t)
            if class_prompts_device == "cpu":  # not registered (stays on the CPU); rows flattened for sparse gathers
                self.class_prompts = [nn.Parameter(t.reshape(num_classes, -1)) for t in tensors]
                self._cpu_prompts = True
            else:
                self.class_prompts = nn.ParameterList(nn.Parameter(t) for t in tensors)
                self._cpu_prompts = False
            self.proxy_head = build_head("ln_linear", dim, embed_dim)
        elif proxy_source in ("encoder", "fixed_encoder"):
            self.proxy_head = build_head("ln_linear", dim, embed_dim)
            if proxy_source == "fixed_encoder":
                self.proxy_head.requires_grad_(False)
        self.accumulator = build_accumulator(accumulator, embed_dim, dropout=rnn_dropout, keep=ema_keep)
        self.register_buffer("container", nn.functional.normalize(_xavier_over8(num_classes, embed_dim), dim=1))
        if proxy_bias_init == "official":
            bias = _xavier_over8(num_classes, embed_dim)
        else:   # PML's Proxy-Anchor proxies: about 12x the official norm at 100 classes and 128 dimensions
            bias = nn.init.kaiming_normal_(torch.empty(num_classes, embed_dim), mode="fan_out")
        self.proxy_bias = nn.Parameter(bias)
        self.proxy_bias._umlkit_group = "proxy"  # the official second optimizer at lr_proxy (optimizer.lr_mult.proxy)

    def sparse_parameters(self) -> list[nn.Parameter]:
        """Class prompts kept on the CPU (empty unless ``class_prompts_device="cpu"``)."""
        return list(self.class_prompts) if self.class_prompts is not None and self._cpu_prompts else []

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for i, p in enumerate(self.sparse_parameters()):  # CPU-resident prompts are not registered; save them too
            destination[f"{prefix}cpu_class_prompts.{i}"] = p if keep_vars else p.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        for i, p in enumerate(self.sparse_parameters()):
            key = f"{prefix}cpu_class_prompts.{i}"
            if key not in state_dict:
                missing_keys.append(key)
                continue
            if key in unexpected_keys:
                unexpected_keys.remove(key)
            if tuple(state_dict[key].shape) != tuple(p.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(state_dict[key].shape)}"
                                  f", the model has {tuple(p.shape)}")
                continue
            with torch.no_grad():
                p.copy_(state_dict[key])

    def _proxy_features(self, x: torch.Tensor, labels: torch.Tensor, image_feat: torch.Tensor,
                        image_emb: torch.Tensor) -> torch.Tensor:
        if self.proxy_source == "sample":
            return image_emb
        if self.proxy_source in ("encoder", "fixed_encoder"):
            return nn.functional.normalize(self.proxy_head(image_feat.detach()), dim=-1)
        if self._cpu_prompts:  # the batch's rows only, with a sparse gradient for the engine's row-sparse optimizer
            rows, inverse = torch.unique(labels.cpu(), return_inverse=True)
            inverse = inverse.to(x.device)
            prompts = [nn.functional.embedding(rows, p, sparse=True).view(len(rows), n, -1).to(x.device)[inverse]
                       if n else None for p, n in zip(self.class_prompts, self.class_prompt_counts)]
        else:
            prompts = [p[labels] if p.shape[1] else None for p in self.class_prompts]
        feat = self.backbone.forward_features(x, layer_prompts=prompts, use_task_prompts=False)
        return nn.functional.normalize(self.proxy_head(feat), dim=-1)

    def forward_train(self, x: torch.Tensor, labels: torch.Tensor) -> dict:
        """``{"embeddings": (B, E), "proxies": proxies for all classes (n_classes, E)}``.

        The batch must hold k samples of each of its classes, grouped by class (VPTSP's class-random sampler);
        groups are found by consecutive equal labels as the official code does.
        """
        if labels.min() < 0 or labels.max() >= self.num_classes:
            raise ValueError(f"labels must lie in [0, {self.num_classes}), "
                             f"got [{int(labels.min())}, {int(labels.max())}]")
        feat = self.features(x)
        emb = nn.functional.normalize(self.head(feat), dim=-1)
        proxy_feat = self._proxy_features(x, labels, feat, emb)
        classes, counts = torch.unique_consecutive(labels, return_counts=True)
        if classes.numel() != torch.unique(labels).numel() or not bool((counts == counts[0]).all()):
            raise ValueError("VPTSP needs batches grouped by class with the same number of samples per class "
                             f"(got label run lengths {counts.tolist()}); use the class-random sampler")
        grouped = proxy_feat.view(classes.numel(), int(counts[0]), -1)
        container = self.container.detach().clone()
        updated = self.accumulator(container[classes], grouped)
        container = container.index_put((classes,), updated)
        container = nn.functional.normalize(container, dim=1)
        self.container.copy_(container.detach())
        proxies = self.alpha * self.proxy_bias + (1 - self.alpha) * container
        return {"embeddings": emb, "proxies": proxies}
