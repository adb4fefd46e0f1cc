"""Pretraining of the quick profile's tiny ViT on UML-Mini's synthetic pretraining set.

Recipe from the UML-Mini study, round 2 (``shared/reference/uml_mini_study2.md``): one linear softmax head per
generator attribute on the CLS feature (shape 8, texture 5, period 2, aspect 3, disc position 5, body-hue bin 8,
disc-hue bin 8, scale 2), loss = the sum of the cross-entropies, 12 epochs of AdamW (lr 1e-3, weight decay 0.05)
with a per-step schedule (10 % linear warm-up, then cosine: OneCycleLR), batch 128, +-2 px random translation, no
flip (flips would swap the E/W disc positions the SOP-/In-shop-like classes are defined by). The study measured
152 s on 2 CPU cores.

The named 320-way (colour, texture, shape) classifier used for language-guidance pseudolabels is the product of
the three marginal heads: log p(class) = log p(hue) + log p(texture) + log p(shape).

Written by hand: a 40-line supervised loop has no library equivalent worth a dependency (timm's train script is
a CLI, not a function).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from umlkit.data.mini import PRETRAIN_WORLDS, pretraining_class_names, pretraining_set
from umlkit.models.backbones import TINY_WEIGHTS, create_backbone
from umlkit.models.recipes import RECIPES, TINY_ARCH, weight_files
from umlkit.results import atomic_write, file_lock
from umlkit.results import file_sha256 as sha256

__all__ = ["pretrain_tiny_vit", "sha256", "class_logits", "load_heads", "TINY_HEADS", "RECIPES", "head_accuracies",
           "observable_targets", "plateau_epoch", "weight_files"]

TINY_HEADS = TINY_WEIGHTS.with_name("vit_tiny_uml_patch8_32.heads.safetensors")
TINY_SHA = TINY_WEIGHTS.with_name("SHA256SUMS")


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
    """The attribute heads of a heads file, each as wide as its stored weight (a world's heads may differ from
    :data:`PRETRAIN_HEADS`)."""
    from safetensors.torch import load_file
    state = load_file(str(path))
    names = sorted({k.rsplit(".", 1)[0] for k in state})
    heads = nn.ModuleDict({k: nn.Linear(state[f"{k}.weight"].shape[1], state[f"{k}.weight"].shape[0])
                           for k in names})
    heads.load_state_dict(state)
    return heads


IGNORE = -100  # torch's ignore_index: a target the image cannot show


def observable_targets(targets: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The head targets with what the image cannot show set to ``IGNORE``: the period of a plain (untextured)
    body and the hue of an absent secondary disc. Bayes-optimal accuracy on the unmasked targets is capped at
    90 % (period: 1/5 of the images are plain, a coin flip) and 82.5 % (disc hue: 1/5 have no disc, 1/8 chance)."""
    out = {k: v.copy() for k, v in targets.items()}
    out["period"][targets["texture"] == 0] = IGNORE  # TEXTURES[0] == "plain"
    out["disc_hue"][targets["disc_pos"] == 0] = IGNORE  # DISC_POS[0] == "none"
    return out


def plateau_epoch(losses: list[float], tol: float = 0.01) -> int:
    """The first epoch (1-based) after which the loss never again falls by more than ``tol`` (relative) below its
    value at that epoch: where the curve has flattened."""
    for e, value in enumerate(losses):
        if min(losses[e:]) >= value * (1 - tol):
            return e + 1
    return len(losses)


def _head_losses(feats: torch.Tensor, heads: nn.ModuleDict, y: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Cross-entropy per head; a head whose every target in the batch is ignored contributes 0."""
    out = {}
    for k, h in heads.items():
        t = y[k]
        out[k] = (nn.functional.cross_entropy(h(feats), t, ignore_index=IGNORE) if bool((t != IGNORE).any())
                  else feats.sum() * 0.0)
    return out


@torch.no_grad()
def _validate(model: nn.Module, heads: nn.ModuleDict, x: torch.Tensor, y: dict[str, torch.Tensor],
              batch: int = 500) -> tuple[float, dict[str, float], torch.Tensor]:
    """(summed validation loss, accuracy per head over the images that show it, CLS features)."""
    model.eval()
    feats = torch.cat([model(x[i:i + batch]) for i in range(0, len(x), batch)])
    model.train()
    loss = float(sum(_head_losses(feats, heads, y).values()))
    acc = {}
    for k, h in heads.items():
        keep = y[k] != IGNORE
        acc[k] = float((h(feats[keep]).argmax(1) == y[k][keep]).float().mean())
    return loss, acc, feats


def head_accuracies(recipe: str = "v2", n: int = 2000, data_seed: int = 1234, world: str | None = None
                    ) -> dict[str, float]:
    """Validation accuracy per head of a shipped checkpoint, measured now on the validation images of ``world``
    (default: the recipe's; ``pretraining_set(n, seed=data_seed + 1, world=...)``) with the same rule for every
    checkpoint: the period head on textured bodies only, the disc-hue head on images with a disc only
    (:func:`observable_targets`), plus the named 320-way classifier where the heads are the eight-shape ones. A v1
    report written before that rule counted every image. Heads the world does not supervise are skipped."""
    from umlkit.models.backbones import create_backbone
    files = weight_files(recipe)
    model = create_backbone(RECIPES[recipe].get("backbone", TINY_ARCH), weights=files["weights"])
    heads = load_heads(files["heads"])
    images, targets, _ = pretraining_set(n, seed=data_seed + 1, world=world or RECIPES[recipe].get("world", "v2"))
    heads = nn.ModuleDict({k: h for k, h in heads.items() if k in targets})
    yv = {k: torch.from_numpy(v) for k, v in observable_targets(targets).items()}
    _, acc, feats = _validate(model, heads, _to_input(images), yv)
    acc.update(_named_accuracy(heads, feats, targets))
    return acc


def _named_accuracy(heads: nn.ModuleDict, feats: torch.Tensor, targets: dict[str, np.ndarray]) -> dict[str, float]:
    """``{"class (320 named)": accuracy}`` of :func:`class_logits` over the images of a named class, when the
    hue, texture and shape heads are the named classes' (8, 5, 8 outputs); else ``{}``."""
    if [heads[k].out_features for k in ("hue", "texture", "shape")] != [8, 5, 8]:
        return {}
    with torch.no_grad():
        named = class_logits({k: h(feats) for k, h in heads.items()})
    keep = torch.from_numpy(targets["class"] >= 0)
    hit = named.argmax(1) == torch.from_numpy(targets["class"])
    return {"class (320 named)": float(hit[keep].float().mean())}


def pretrain_tiny_vit(out: str | Path | None = None, epochs: int | None = None, n_images: int | None = None,
                      batch_size: int = 128, lr: float = 1e-3, seed: int = 0, data_seed: int = 1234,
                      progress: bool = True, log: callable = print, recipe: str = "v1", overwrite: bool = False,
                      device: str = "cpu") -> dict:
    """Pretrain ``vit_tiny_uml_patch8_32`` with a recipe of :data:`RECIPES` and write its weights, heads, report
    and ``SHA256SUMS`` (other entries of an existing ``SHA256SUMS`` are kept) to ``out``.

    ``epochs`` and ``n_images`` default to the recipe's. After every epoch the model is evaluated on 2,000 fresh
    images (no random numbers are drawn, so the weights do not depend on it): summed validation loss and
    accuracy per head, the curve of the report. Deterministic on CPU for a fixed thread count.

    ``device``: where the model trains (e.g. ``"cuda"``). Every random number (initialisation, order, shifts) is
    drawn on the CPU as before, so a GPU run follows the CPU run's recipe draw for draw and differs from it only by
    floating-point rounding (TF32 is switched off); the report names the device.

    Existing weights, heads or report files are replaced only with ``overwrite=True`` (the shipped ones are what the
    committed records were trained with); the folder and ``SHA256SUMS`` are checked before training, and every file
    is written atomically.
    """
    if recipe not in RECIPES:
        raise ValueError(f"unknown pretraining recipe {recipe!r}; choose one of {sorted(RECIPES)}")
    spec = RECIPES[recipe]
    epochs = spec["epochs"] if epochs is None else int(epochs)
    n_images = spec["n_images"] if n_images is None else int(n_images)
    files = weight_files(recipe, out)
    _check_destination(files, overwrite)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    world = spec.get("world", "v2")
    images, targets, _ = pretraining_set(n_images, seed=data_seed, world=world)
    val_images, val_targets, _ = pretraining_set(2000, seed=data_seed + 1, world=world)
    masked = observable_targets(targets) if spec["mask_unobservable"] else targets
    x_all = _to_input(images)
    y_all = {k: torch.from_numpy(masked[k]) for k in PRETRAIN_WORLDS[world].heads}
    xv = _to_input(val_images)
    yv = {k: torch.from_numpy(v) for k, v in observable_targets(val_targets).items()}
    model = create_backbone(spec.get("backbone", TINY_ARCH))
    heads = nn.ModuleDict({k: nn.Linear(model.num_features, n) for k, n in PRETRAIN_WORLDS[world].heads.items()})
    dev = _device(device)
    model, heads, x_all, xv = model.to(dev), heads.to(dev), x_all.to(dev), xv.to(dev)
    y_all, yv = {k: v.to(dev) for k, v in y_all.items()}, {k: v.to(dev) for k, v in yv.items()}
    params = list(model.parameters()) + list(heads.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.05)
    steps_per_epoch = n_images // batch_size
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps_per_epoch,
                                                pct_start=0.1, anneal_strategy="cos")
    bar = None
    if progress:
        from umlkit._progress import tqdm
        bar = tqdm(total=epochs * steps_per_epoch, desc=f"pretrain tiny ViT ({recipe})", unit="step")
    curve = []
    model.train()
    for epoch in range(epochs):
        perm = torch.randperm(n_images, generator=gen)
        batches = [perm[s * batch_size:(s + 1) * batch_size].to(dev) for s in range(steps_per_epoch)]
        total = _train_epoch(model, heads, opt, sched, x_all, y_all, batches, gen, bar, epoch)
        val_loss, val_acc, _ = _validate(model, heads, xv, yv)
        curve.append({"epoch": epoch + 1, "train_loss": round(total / steps_per_epoch, 4),
                      "val_loss": round(val_loss, 4), "val_accuracy": {k: round(v, 4) for k, v in val_acc.items()},
                      "seconds": round(time.perf_counter() - t0, 1)})
    if bar is not None:
        bar.close()
    model.eval()
    _, acc, feats = _validate(model, heads, xv, yv)
    model, heads = model.cpu(), heads.cpu()
    acc.update(_named_accuracy(heads, feats.cpu(), val_targets))
    report = _write_outputs(files, model, heads, acc, curve,
                            {"recipe": recipe, "world": world, "backbone": spec.get("backbone", TINY_ARCH),
                             "seconds": round(time.perf_counter() - t0, 1), "epochs": epochs,
                             "n_images": n_images, "seed": seed,
                             "masked_unobservable_targets": spec["mask_unobservable"],
                             "device": _device_name(dev)})
    log(json.dumps(report["val_accuracy"]))
    return report


def _train_epoch(model, heads, opt, sched, x_all, y_all, batches, gen, bar, epoch: int) -> float:
    """One pass over ``batches`` (index tensors); returns the summed training loss."""
    total = 0.0
    for idx in batches:
        feat = model(_shift(x_all[idx], gen))
        loss = sum(_head_losses(feat, heads, {k: v[idx] for k, v in y_all.items()}).values())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        total += loss.item()
        if bar is not None:
            bar.update(1)
            bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.3f}")
    return total


def _device(device: str) -> torch.device:
    """The training device; a GPU run keeps fp32 products in fp32 (no TF32), as on the CPU."""
    dev = torch.device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r}, but torch sees no CUDA device here; use device='cpu'")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return dev


def _device_name(dev: torch.device) -> str:
    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"


def _write_outputs(files: dict, model, heads, acc: dict, curve: list, head: dict) -> dict:
    """Write the weights, heads, ``SHA256SUMS`` and the report (``head`` + curves, accuracies, hashes, machine),
    each atomically; returns the report."""
    import platform

    from safetensors.torch import save as to_bytes
    atomic_write(files["weights"], to_bytes({k: v.contiguous() for k, v in model.state_dict().items()}))
    atomic_write(files["heads"], to_bytes({k: v.contiguous() for k, v in heads.state_dict().items()}))
    report = {**head,
              "loss_per_epoch": [c["train_loss"] for c in curve],
              "val_loss_per_epoch": [c["val_loss"] for c in curve],
              "val_loss_plateau_epoch": plateau_epoch([c["val_loss"] for c in curve]),
              "val_accuracy": {k: round(v, 4) for k, v in acc.items()},
              "val_accuracy_note": "period over textured images, disc_hue over images with a disc",
              "curve": curve,
              "sha256": {files["weights"].name: sha256(files["weights"]), files["heads"].name: sha256(files["heads"])},
              "size_bytes": files["weights"].stat().st_size, "torch": torch.__version__,
              "threads": torch.get_num_threads(), "cpu": _cpu_name() or platform.processor()}
    with file_lock(files["sums"]):   # two recipes pretrained at once into one folder: each keeps the other's entries
        sums = {**_read_sums(files["sums"]), **report["sha256"]}
        atomic_write(files["sums"], "".join(f"{h}  {n}\n" for n, h in sorted(sums.items())))
    atomic_write(files["report"], json.dumps(report, indent=1))
    return report


def _check_destination(files: dict[str, Path], overwrite: bool) -> dict[str, str]:
    """Before any training: refuse files that would be replaced without ``overwrite``, a folder that cannot be
    written, and a ``SHA256SUMS`` that cannot be read (its entries, kept and updated, are returned)."""
    import tempfile
    existing = [str(files[k]) for k in ("weights", "heads", "report") if files[k].exists()]
    if existing and not overwrite:
        raise FileExistsError(f"pretraining would replace {', '.join(existing)}; pass overwrite=True (CLI: "
                              f"--overwrite) to replace them, or choose another folder (--out). Shipped weights are "
                              f"what the committed records were trained with. Nothing was changed.")
    folder = files["weights"].parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise OSError(f"cannot write the weights into {folder} ({err.strerror or err}); choose another --out") from None
    return _read_sums(files["sums"])


def _read_sums(path: Path) -> dict[str, str]:
    """``{file name: sha256}`` of a ``SHA256SUMS`` file (empty when there is none)."""
    sums = {}
    if path.is_file():
        for no, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2 or len(parts[0]) != 64:
                raise ValueError(f"{path}, line {no}: expected '<sha256>  <file name>', got {line[:80]!r}; "
                                 f"fix or move the file before pretraining")
            sums[parts[1]] = parts[0]
    return sums


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""

