"""Pretraining of the quick profile's tiny ViT on UML-Mini's synthetic pretraining set.

Recipe from the UML-Mini study, round 2 (``shared/reference/uml_mini_study2.md``): one linear softmax head per
generator attribute on the CLS feature (shape 8, texture 5, period 2, aspect 3, disc position 5, body-hue bin 8,
disc-hue bin 8, scale 2), loss = the sum of the cross-entropies, 12 epochs of AdamW (lr 1e-3, weight decay 0.05)
with a per-step schedule (10 % linear warm-up, then cosine: OneCycleLR), batch 128, +-2 px random translation, no flip (flips would swap the E/W disc
positions the SOP-/In-shop-like classes are defined by). The study measured 152 s on 2 CPU cores.

The named 320-way (colour, texture, shape) classifier used for language-guidance pseudolabels is the product of
the three marginal heads: log p(class) = log p(hue) + log p(texture) + log p(shape).

Written by hand: a 40-line supervised loop has no library equivalent worth a dependency (timm's train script is
a CLI, not a function).
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from umlkit.data.mini import PRETRAIN_HEADS, pretraining_class_names, pretraining_set
from umlkit.models.backbones import TINY_WEIGHTS, create_backbone

__all__ = ["pretrain_tiny_vit", "sha256", "class_logits", "load_heads", "TINY_HEADS"]

TINY_HEADS = TINY_WEIGHTS.with_name("vit_tiny_uml_patch8_32.heads.safetensors")
TINY_SHA = TINY_WEIGHTS.with_name("SHA256SUMS")


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _to_input(images_uint8: np.ndarray) -> torch.Tensor:
    x = torch.from_numpy(images_uint8).permute(0, 3, 1, 2).float().div_(255.0)
    return (x - 0.5) / 0.5


def _shift(x: torch.Tensor, gen: torch.Generator, max_shift: int = 2) -> torch.Tensor:
    """Random translation by up to ``max_shift`` px per image (edge-replicate padding)."""
    b = x.shape[0]
    pad = nn.functional.pad(x, (max_shift,) * 4, mode="replicate")
    dx = torch.randint(0, 2 * max_shift + 1, (b,), generator=gen)
    dy = torch.randint(0, 2 * max_shift + 1, (b,), generator=gen)
    h, w = x.shape[2:]
    return torch.stack([pad[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(b)])


def class_logits(head_logits: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, 320) log-probabilities of the named (colour, texture, shape) classes from the marginal heads."""
    lh = head_logits["hue"].log_softmax(-1)
    lt = head_logits["texture"].log_softmax(-1)
    ls = head_logits["shape"].log_softmax(-1)
    return (lh[:, :, None, None] + lt[:, None, :, None] + ls[:, None, None, :]).flatten(1)


def class_names() -> list[str]:
    """Names of the 320 classes of :func:`class_logits` (UML-Mini's named pretraining classes)."""
    return pretraining_class_names()


def load_heads(path: str | Path = TINY_HEADS) -> nn.ModuleDict:
    from safetensors.torch import load_file
    state = load_file(str(path))
    heads = nn.ModuleDict({k: nn.Linear(state[f"{k}.weight"].shape[1], n) for k, n in PRETRAIN_HEADS.items()})
    heads.load_state_dict(state)
    return heads


def pretrain_tiny_vit(out: str | Path | None = None, epochs: int = 12, n_images: int = 19200, batch_size: int = 128,
                      lr: float = 1e-3, seed: int = 0, data_seed: int = 1234, progress: bool = True,
                      log: callable = print) -> dict:
    """Pretrain ``vit_tiny_uml_patch8_32`` and write its weights (+ heads, + SHA256SUMS) to ``out``.

    Returns a report: seconds, final training loss, validation accuracy per head (on 2,000 fresh images).
    Deterministic on CPU for a fixed thread count.
    """
    from safetensors.torch import save_file
    out = Path(out) if out is not None else TINY_WEIGHTS.parent
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    images, targets, _ = pretraining_set(n_images, seed=data_seed)
    val_images, val_targets, _ = pretraining_set(2000, seed=data_seed + 1)
    x_all = _to_input(images)
    y_all = {k: torch.from_numpy(targets[k]) for k in PRETRAIN_HEADS}
    model = create_backbone("vit_tiny_uml_patch8_32")
    heads = nn.ModuleDict({k: nn.Linear(model.num_features, n) for k, n in PRETRAIN_HEADS.items()})
    params = list(model.parameters()) + list(heads.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.05)
    steps_per_epoch = n_images // batch_size
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps_per_epoch,
                                                pct_start=0.1, anneal_strategy="cos")
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=epochs * steps_per_epoch, desc="pretrain tiny ViT", unit="step")
    history = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(n_images, generator=gen)
        total = 0.0
        for s in range(steps_per_epoch):
            idx = perm[s * batch_size:(s + 1) * batch_size]
            feat = model(_shift(x_all[idx], gen))
            loss = sum(nn.functional.cross_entropy(h(feat), y_all[k][idx]) for k, h in heads.items())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.3f}")
        history.append(total / steps_per_epoch)
    if bar is not None:
        bar.close()
    model.eval()
    with torch.no_grad():
        xv = _to_input(val_images)
        feats = torch.cat([model(xv[i:i + 500]) for i in range(0, len(xv), 500)])
        acc = {k: float((h(feats).argmax(1) == torch.from_numpy(val_targets[k])).float().mean())
               for k, h in heads.items()}
        named = class_logits({k: h(feats) for k, h in heads.items()})
        acc["class (320 named)"] = float((named.argmax(1) == torch.from_numpy(val_targets["class"])).float().mean())
    weights = out / TINY_WEIGHTS.name
    heads_path = out / TINY_HEADS.name
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
    save_file({k: v.contiguous() for k, v in heads.state_dict().items()}, str(heads_path))
    report = {"seconds": round(time.perf_counter() - t0, 1), "epochs": epochs, "n_images": n_images, "seed": seed,
              "loss_per_epoch": [round(v, 4) for v in history], "val_accuracy": {k: round(v, 4) for k, v in acc.items()},
              "sha256": {weights.name: sha256(weights), heads_path.name: sha256(heads_path)},
              "size_bytes": weights.stat().st_size, "torch": torch.__version__, "threads": torch.get_num_threads()}
    (out / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in report["sha256"].items()))
    (out / "pretrain_report.json").write_text(json.dumps(report, indent=1))
    log(json.dumps(report["val_accuracy"]))
    return report
