"""Runners: what turns a record's key (a resolved configuration, or a group of them) into a measured result.

A table row names its runner; the record stores that name, so a stale record can be recomputed from the record
alone (``umlkit reproduce --stale``). Every paper shares these:

* ``train``: :func:`umlkit.train.fit` with checkpoints in a temporary folder (or, inside :func:`resumable_runs`, in
  a folder per configuration that a preempted task resumes from: the Slurm executor's); the result holds the
  metrics at every evaluation epoch (``curves``: test, and validation when ``data.val_fraction`` or an explicit
  validation split holds classes out), the last-epoch test and validation scores, the training loss per epoch,
  trainable parameters and, for models with a prompt pool, the mean pool weights per source (PUMA Figure 3).
  ``test`` and ``val`` hold R@1; the other metrics of ``train.metrics`` (e.g. MAP@R) go under ``test_metrics``
  and ``val_metrics`` (``{source: {metric: score}}``, also in each curve point and in ``train_analysis``'s curve),
  which a run evaluating R@1 only does not have (its result is as it always was).
* ``zero_shot``: the frozen backbone's feature (no head), evaluated once.
* ``probed``: ``train`` (or ``zero_shot``), then linear probes of the pretraining attributes on the model's
  embedding and feature (the regime map's forgetting measurement).
* ``specialists``: one model per source (``{source: config}``); each embeds the whole unified test set; the result
  holds own-source scores, the model x source cross matrix and the scores of the ensemble that averages the
  L2-normalised embeddings of all models (PUMA ``unified_eval.py``); with per-epoch evaluation each model's
  ``curves``, and with held-out classes each model's score on its own source's (``val_own``).

A paper module adds a runner with :func:`register_runner` when it needs one the others do not.
Scores are stored under the papers' dataset names (``CUB``, ``InShop``, ...; :data:`SOURCE_NAMES`).
"""
from __future__ import annotations

import contextlib
import contextvars
import copy
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from umlkit._paths import data_root
from umlkit.data import build_transforms, load_unified
from umlkit.data.unified import PUMA_ORDER
from umlkit.metrics import cross_source_rate, unified_evaluation
from umlkit.models import count_trainable, create_model
from umlkit.train.evaluate import extract_embeddings

__all__ = ["RUNNERS", "register_runner", "run", "SOURCE_NAMES", "train_run", "zero_shot_run", "specialists_run",
           "ensemble_embeddings", "weights_for", "test_set", "train_analysis_run", "fixed_class_recall",
           "probed_run", "probe_features", "resumable_runs"]

# umlkit source name -> the name the papers' tables use
SOURCE_NAMES = {"cub": "CUB", "cars": "Cars", "sop": "SOP", "inshop": "InShop", "nabirds": "NABirds", "dogs": "Dogs",
                "flowers": "Flowers", "aircraft": "Aircraft"}

RUNNERS: dict[str, Callable[[dict], dict]] = {}


def register_runner(name: str):
    """Decorator: make ``fn(key) -> result`` available to tables and records under ``name``."""
    def deco(fn):
        if name in RUNNERS and RUNNERS[name] is not fn:
            raise ValueError(f"runner {name!r} is already registered ({RUNNERS[name].__module__})")
        RUNNERS[name] = fn
        return fn
    return deco


def run(name: str, key: dict) -> dict:
    if name not in RUNNERS:
        raise KeyError(f"unknown runner {name!r}; registered: {sorted(RUNNERS)}")
    return RUNNERS[name](key)


def _scores(frame, metric: str = "R@1") -> dict:
    return {SOURCE_NAMES.get(k, k): round(float(v), 3) for k, v in frame[metric].items()}


def _epoch_scores(history_row: dict, split: str, metric: str = "R@1") -> dict | None:
    block = history_row.get(split)
    return None if block is None else {SOURCE_NAMES.get(k, k): round(v[metric], 3) for k, v in block.items()}


def _more_metrics(cfg: dict) -> list[str]:
    """The metrics of ``train.metrics`` beyond R@1 (the one every result keeps under ``test``): kept under
    ``test_metrics`` (and ``val_metrics``); none for a run that evaluates R@1 only, whose result stays as it was."""
    return [m for m in (cfg.get("train") or {}).get("metrics") or ["R@1"] if m != "R@1"]


def _metric_block(history_row: dict, split: str, metrics: Sequence[str]) -> dict | None:
    """``{source: {metric: score}}`` of ``metrics`` in one evaluation of ``split``; None where it has none."""
    block = history_row.get(split)
    if block is None or not metrics:
        return None
    return {SOURCE_NAMES.get(k, k): {m: round(v[m], 3) for m in metrics} for k, v in block.items()}


def weights_for(cfg: dict) -> dict:
    """The configuration ``fit`` runs: a ``recipe:pretrain_epochs=N`` weights entry becomes a file, pretrained once
    and kept under ``<data root>/tiny_vit_pretrain_<N>ep`` (a record's key never holds a machine's path)."""
    w = cfg["model"]["weights"]
    if not (isinstance(w, str) and w.startswith("recipe:")):
        return cfg
    epochs = int(w.split("=", 1)[1])
    out = data_root() / f"tiny_vit_pretrain_{epochs}ep"
    path = out / "vit_tiny_uml_patch8_32.safetensors"
    if not path.is_file():
        from umlkit.models.pretrain import pretrain_tiny_vit
        # its own cache folder: files an interrupted run left there (heads before weights) are replaced
        pretrain_tiny_vit(out, epochs=epochs, progress=False, log=lambda *_: None, overwrite=True)
    resolved = copy.deepcopy(cfg)
    resolved["model"]["weights"] = str(path)
    return resolved


def test_set(cfg: dict):
    """The unified test split of the configuration's sources (``data.datasets``, in PUMA's order) with its evaluation
    transform (the classes ``data.splits`` lists where it lists them, as :func:`umlkit.train.engine.build_data`
    splits). Until 2026-12-06 it loaded all eight sources whatever ``data.datasets`` said, so the cross-source rate
    and pool weights of a run on fewer sources counted sources it never trained on; those records are stale."""
    from umlkit.models.backbones import backbone_data_config
    from umlkit.train.engine import build_data, data_root_of
    data_config = backbone_data_config(cfg["model"]["backbone"])
    if cfg["data"].get("splits"):
        return build_data(cfg, data_config)[1]
    tf = build_transforms(cfg["data"]["transform"], data_config, train=False)
    names = sorted(cfg["data"]["datasets"], key=lambda n: (n not in PUMA_ORDER, PUMA_ORDER.index(n) if n in PUMA_ORDER
                                                             else 0))
    return load_unified(data_root_of(cfg), "test", names=names, transform=tf,
                        cache=cfg["data"]["cache"])


_RUN_FOLDER: contextvars.ContextVar[Path | None] = contextvars.ContextVar("umlkit_run_folder", default=None)


@contextlib.contextmanager
def resumable_runs(folder: Path | None):
    """Inside the block, every training run keeps its checkpoints in ``folder/<configuration hash>`` and resumes
    from the last one it finds there (the engine resumes bit-exactly), so a record's runs survive a preempted or
    timed-out task; ``None``: temporary folders, as outside the block. The caller removes ``folder`` once the record
    is written."""
    token = _RUN_FOLDER.set(None if folder is None else Path(folder))
    try:
        yield
    finally:
        _RUN_FOLDER.reset(token)


def _fit(cfg: dict, data: tuple | None = None):
    """Train a record key's configuration, its weights resolved by the caller (:func:`weights_for`, once): resolved
    when the key was made, so ``fit`` takes it as given; ``data``: the datasets the runner built from it."""
    from umlkit.train import fit
    folder = _RUN_FOLDER.get()
    if folder is not None:
        from umlkit.results import config_hash
        return fit(cfg, run_dir=folder / config_hash(cfg), resume=True, resolved=True, data=data)
    with tempfile.TemporaryDirectory() as tmp:
        return fit(cfg, run_dir=tmp, resolved=True, data=data)


@register_runner("train")
def train_run(cfg: dict) -> dict:
    return _trained(cfg)[0]


def _trained(cfg: dict) -> tuple[dict, torch.nn.Module]:
    """The ``train`` runner's result and the trained model."""
    res = _fit(weights_for(cfg))
    out = {"test": _scores(res.last), "loss": [round(h["loss"], 4) for h in res.history],
           "trainable_model": count_trainable(res.model), "trainable_total": count_trainable(res.model, res.loss),
           "train_seconds": round(res.seconds, 1)}
    more = _more_metrics(cfg)
    if more:   # train.metrics beyond R@1, per source (the last evaluation, as ``test``)
        out["test_metrics"] = {name: {m: _scores(res.last, m)[name] for m in more} for name in out["test"]}
    out["curves"] = _curves(res.history, more)
    if "val" in res.history[-1]:
        out["val"] = _epoch_scores(res.history[-1], "val")
        if more:
            out["val_metrics"] = _metric_block(res.history[-1], "val", more)
    if res.wise_ft:   # train.wise_ft: the weight-space mixtures of the run's start and end
        out["wise_ft"] = [{"alpha": p["alpha"], **{s: _epoch_scores(p, s) for s in ("test", "val") if s in p}}
                          for p in res.wise_ft]
    unified = len(cfg["data"]["datasets"]) > 1
    if unified or getattr(res.model.backbone, "prompt_pool", None) is not None:
        test = test_set(cfg)   # loaded once for both analyses
        out.update(_prompt_weights(res.model, test))
        if unified:   # how often the model's Unified top-1 crosses sources
            out["cross_source"] = _cross_source(extract_embeddings(res.model, test, batch_size=512,
                                                                   device=_device_of(res.model))[0], test)
    return out, res.model


def _cross_source(emb, test) -> dict:
    """PUMA's bias across sources, measured: per source, the % of queries whose Unified top-1 is from another source."""
    rate = cross_source_rate(emb, test.sources, is_query=test.is_query, is_gallery=test.is_gallery,
                             source_names=test.source_names)
    return {SOURCE_NAMES.get(k, k): round(float(v), 3) for k, v in rate.items()}


def _curves(history: list[dict], more: Sequence[str] = ()) -> list[dict]:
    """The scores of every evaluated epoch: ``{"epoch", "loss", "test": {...}, "val": {...}}``, with the metrics
    ``more`` (train.metrics beyond R@1) under ``test_metrics`` and ``val_metrics`` where there are any."""
    curves = []
    for h in history:
        point = {"epoch": h["epoch"], "loss": round(h["loss"], 4)}
        for split in ("test", "val"):
            s = _epoch_scores(h, split)
            if s is not None:
                point[split] = s
                if more:
                    point[f"{split}_metrics"] = _metric_block(h, split, more)
        if len(point) > 2:
            curves.append(point)
    return curves


@register_runner("zero_shot")
def zero_shot_run(cfg: dict) -> dict:
    return _zero_shot(cfg)[0]


def _zero_shot(cfg: dict) -> tuple[dict, torch.nn.Module]:
    """The ``zero_shot`` runner's result and the frozen model."""
    resolved = weights_for(cfg)
    torch.manual_seed(int(cfg["seed"]))
    m = resolved["model"]
    model = create_model(m["backbone"], "zero_shot", pretrained=bool(m["pretrained"]), weights=m["weights"])
    test = test_set(cfg)
    emb, labels = extract_embeddings(model, test, batch_size=512)
    frame = unified_evaluation(emb, labels, test.sources, is_query=test.is_query, is_gallery=test.is_gallery,
                               source_names=test.source_names)
    out = {"test": _scores(frame), "trainable_model": 0}
    if len(test.source_names) > 1:
        out["cross_source"] = _cross_source(emb, test)
    return out, model


class _Images(torch.utils.data.Dataset):
    """uint8 (n, H, W, 3) images with integer labels, through a transform (for :func:`extract_embeddings`)."""

    def __init__(self, images: np.ndarray, transform):
        self.images, self.transform = images, transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        from PIL import Image
        return self.transform(Image.fromarray(self.images[i])), i


def probe_features(model: torch.nn.Module, cfg: dict, images: int, seed: int) -> tuple[dict, dict]:
    """The model's retrieval ``embedding`` and its backbone ``feature`` of ``images`` fresh pretraining-set images
    (:func:`umlkit.data.mini.pretraining_set` at ``seed``) through the configuration's evaluation transform, on
    the model's device; and the images' attribute targets."""
    from umlkit.data.mini import pretraining_set
    from umlkit.models.backbones import backbone_data_config
    pics, targets, _ = pretraining_set(int(images), seed=int(seed))
    tf = build_transforms(cfg["data"]["transform"], backbone_data_config(cfg["model"]["backbone"]), train=False)
    data = _Images(pics, tf)
    device = _device_of(model)
    return ({"embedding": extract_embeddings(model, data, batch_size=512, device=device)[0],
             "feature": extract_embeddings(_Features(model), data, batch_size=512, device=device)[0]}, targets)


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(iter(model.parameters()), torch.zeros(())).device


@register_runner("probed")
def probed_run(key: dict) -> dict:
    """``{"config": a resolved configuration, "probes": {"images": n, "seed": s, "restrict": {attribute: [value
    indices]}}}``: the ``train`` runner's result (``zero_shot`` for ``model.method: zero_shot``), plus linear probes
    of the pretraining attributes (:data:`umlkit.data.mini.PRETRAIN_HEADS`) on the trained model's embedding and
    backbone feature of ``n`` fresh pretraining-set images (:func:`umlkit.metrics.attribute_probes`): ``probes:
    {"embedding": {attribute: accuracy}, "feature": {...}}``, each with the attributes' ``mean``."""
    from umlkit.data.mini import PRETRAIN_HEADS
    from umlkit.metrics import attribute_probes
    cfg, spec = key["config"], dict(key.get("probes") or {})
    unknown = set(spec) - {"images", "seed", "restrict"}
    if unknown or "images" not in spec or "seed" not in spec:
        raise ValueError(f"probes must be {{images, seed, restrict (optional)}}, got keys {sorted(spec)}")
    restrict = {k: [int(v) for v in vals] for k, vals in (spec.get("restrict") or {}).items()}
    out, model = _zero_shot(cfg) if cfg["model"]["method"] == "zero_shot" else _trained(cfg)
    features, targets = probe_features(model, cfg, spec["images"], spec["seed"])
    heads = {h: targets[h] for h in PRETRAIN_HEADS}
    out["probes"] = {}
    for where, x in features.items():
        acc = attribute_probes(x.numpy(), heads, restrict)
        acc["mean"] = round(float(np.mean([acc[h] for h in PRETRAIN_HEADS])), 3)
        out["probes"][where] = acc
    return out


def ensemble_embeddings(embeddings: Sequence[torch.Tensor]) -> torch.Tensor:
    """``unified_eval.py``'s ensemble: the mean of each model's L2-normalised embeddings (not re-normalised)."""
    if not embeddings:
        raise ValueError("ensemble_embeddings needs at least one (n, d) embedding matrix")
    shapes = {tuple(e.shape) for e in embeddings}
    if len(shapes) != 1:
        raise ValueError(f"all models must embed the same items to the same size, got shapes {sorted(shapes)}")
    return torch.stack([torch.nn.functional.normalize(e.float(), dim=1) for e in embeddings]).mean(0)


@register_runner("specialists")
def specialists_run(cfgs: dict[str, dict]) -> dict:
    test = None
    own, cross, embs, n_model, seconds, curves, val_own = {}, {}, [], 0, 0.0, {}, {}
    for src, cfg in cfgs.items():
        if cfg["data"].get("splits"):
            raise ValueError(f"specialists: the {src} model's configuration lists data.splits; the ensemble embeds "
                             "every source's default test split, so explicit class splits are not supported here")
        if test is None:   # the union of every specialist's source: the ensemble is evaluated on all of them
            test = test_set({**cfg, "data": {**cfg["data"], "datasets": list(cfgs)}})
        res = _fit(weights_for(cfg))
        emb, labels = extract_embeddings(res.model, test, batch_size=512, device=_device_of(res.model))
        frame = unified_evaluation(emb, labels, test.sources, is_query=test.is_query, is_gallery=test.is_gallery,
                                   source_names=test.source_names)
        scores = _scores(frame)
        name = SOURCE_NAMES.get(src, src)
        own[name] = scores[name]
        cross[name] = scores
        evaluated = sum(1 for h in res.history if "test" in h or "val" in h)
        if evaluated > 1 or "val" in res.history[-1]:   # evaluated more than once, or classes held out
            curves[name] = _curves(res.history, _more_metrics(cfg))
        if "val" in res.history[-1]:
            val_own[name] = _epoch_scores(res.history[-1], "val")[name]
        embs.append(emb)
        n_model += count_trainable(res.model)
        seconds += res.seconds
    ensemble = ensemble_embeddings(embs)
    frame = unified_evaluation(ensemble, labels, test.sources, is_query=test.is_query,
                               is_gallery=test.is_gallery, source_names=test.source_names)
    out = {"own": own, "cross": cross, "ensemble": _scores(frame), "trainable_model": n_model,
           "train_seconds": round(seconds, 1), "cross_source": _cross_source(ensemble, test)}
    if curves:   # per-epoch scores of each model (records of one evaluation keep none, as before)
        out["curves"] = curves
    if val_own:  # each model on its own source's held-out training classes (data.val_fraction)
        out["val_own"] = val_own
    return out


def _prompt_weights(model, test) -> dict:
    """The pool's weights for every image of ``test`` (the unified test split), averaged per source
    ({source: [M weights]}); empty without a pool."""
    pool = getattr(model.backbone, "prompt_pool", None)
    if pool is None:
        return {}
    loader = torch.utils.data.DataLoader(test, batch_size=512, shuffle=False)
    weights = []
    model.eval()
    device = _device_of(model)
    with torch.no_grad():
        for x, _ in loader:
            model(x.to(device))
            weights.append(model.backbone.last_prompt_weights.float())
    w = torch.cat(weights).numpy()
    src = np.asarray(test.sources)
    return {"prompt_weights": {SOURCE_NAMES[test.source_names[s]]: w[src == s].mean(0).round(5).tolist()
                               for s in np.unique(src)}}


class _Features(torch.nn.Module):
    """A model's backbone feature as a module (so that :func:`extract_embeddings` batches it)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model.features(x)


def _percent(res: dict) -> dict:
    return {k: round(100.0 * float(v), 3) for k, v in res.items() if not k.startswith("n_")}


def fixed_class_recall(emb, labels, n_classes: int, draws: int = 5, seed: int = 0) -> float:
    """Mean R@1 (percent) over ``draws`` random subsets of ``n_classes`` classes, each searched against itself: a
    test set with fewer classes has fewer distractors, so splits compare at the same class count."""
    from umlkit.metrics import evaluate_retrieval
    labels = np.asarray(labels)
    classes = np.unique(labels)
    if n_classes > len(classes):
        raise ValueError(f"fixed_classes={n_classes} but the test set has only {len(classes)} classes")
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(draws):
        keep = np.isin(labels, rng.choice(classes, n_classes, replace=False))
        vals.append(evaluate_retrieval(emb[keep], labels[keep], metrics=["R@1"])["R@1"])
    return round(100.0 * float(np.mean(vals)), 3)


@register_runner("train_analysis")
def train_analysis_run(key: dict) -> dict:
    """``{"config": a resolved configuration, "analysis": {...}}``: one training run (as ``train``), then, with the
    last epoch's model, on its test split every metric of ``analysis["metrics"]``, R@1 at ``fixed_classes`` test
    classes, the structure of the train and test embeddings (pi_intra, pi_inter, pi_ratio, spectral decay rho), with
    ``neighbour_classes: k`` the classes of each test class's k nearest neighbours
    ({query class key: {class key: count}}), ``few_shot`` adaptation
    (:func:`umlkit.train.adapt.few_shot_adaptation` with ``{shots, episodes, iterations, lr_mult}``) and the scores
    on the default test split of every ``transfer`` source. Scores in percent, keyed by the source's paper name.
    ``evaluate: val`` scores the validation classes instead of the test split (the tuning protocol); a test split
    with query and gallery roles (In-shop) is searched query against gallery."""
    from umlkit.metrics import evaluate_retrieval
    from umlkit.models.backbones import backbone_data_config
    from umlkit.train.adapt import adaptable_head
    from umlkit.train.engine import build_data
    cfg, ana = key["config"], key.get("analysis", {})
    if len(cfg["data"]["datasets"]) != 1:
        raise ValueError(f"train_analysis evaluates one source, got data.datasets={cfg['data']['datasets']}")
    src = cfg["data"]["datasets"][0]
    name = SOURCE_NAMES.get(src, src)
    resolved = weights_for(cfg)
    part = ana.get("evaluate", "test")
    if part not in ("test", "val"):
        raise ValueError(f"analysis.evaluate must be 'test' or 'val', got {part!r}")
    built = build_data(resolved, backbone_data_config(cfg["model"]["backbone"]))   # once: training gets these
    train, test, val = built
    if part == "val":  # a tuning run: scored on the held-out training classes, never on test
        if val is None:
            raise ValueError("analysis.evaluate='val' needs validation classes (data.val_fraction or "
                             f"data.splits.{src}.val), the configuration holds none out")
        test = val
    query = np.asarray(test.is_query, bool)
    if not query.all() and any(ana.get(k) for k in ("fixed_classes", "neighbour_classes", "structure", "few_shot")):
        raise ValueError(f"the {name} test split is a query/gallery split; the analysis options fixed_classes, "
                         "neighbour_classes, structure and few_shot need a self-retrieval test set")
    if cfg["model"]["method"] == "zero_shot":  # the frozen backbone's feature, nothing trained
        torch.manual_seed(int(cfg["seed"]))
        m = resolved["model"]
        model = create_model(m["backbone"], "zero_shot", pretrained=bool(m["pretrained"]), weights=m["weights"])
        out = {"trainable_model": 0}
    else:
        res = _fit(resolved, data=built)
        model = res.model
        more = _more_metrics(cfg)   # train.metrics beyond R@1: each curve point's test_metrics
        out = {"loss": [round(h["loss"], 4) for h in res.history], "trainable_model": count_trainable(res.model),
               "train_seconds": round(res.seconds, 1),
               "curves": [{"epoch": h["epoch"], "loss": round(h["loss"], 4), "test": _epoch_scores(h, "test"),
                           **({"test_metrics": _metric_block(h, "test", more)} if more else {})}
                          for h in res.history if "test" in h]}
    if part == "val":  # fit's own evaluation saw the test classes: a tuning record keeps none of it
        out.pop("curves", None)
    train.transform = test.transform  # structure of the training set without augmentation
    model = model.eval()
    heads = adaptable_head(model).eval()

    def embed(ds):
        feat, labels = extract_embeddings(_Features(model), ds, batch_size=512)
        with torch.no_grad():
            return feat, heads(feat), labels

    feat, emb, labels = embed(test)
    metrics = list(ana.get("metrics", ["R@1"]))
    if not query.all():  # In-shop: its queries against its gallery (nothing excluded), as every In-shop table reports
        gallery = np.asarray(test.is_gallery, bool)
        scores = evaluate_retrieval(emb[query], labels[query], emb[gallery], labels[gallery], metrics=metrics)
    else:
        scores = evaluate_retrieval(emb, labels, metrics=metrics)
    out["test"] = {m: {name: v} for m, v in _percent(scores).items()}
    if ana.get("fixed_classes"):
        k = int(ana["fixed_classes"])
        out["test"][f"R@1@{k}cls"] = {name: fixed_class_recall(emb, labels, k, seed=int(cfg["seed"]))}
    _extra_analyses(out, ana, cfg, resolved, model, embed, (train, test), (feat, emb, labels), metrics)
    return out


def _published_supports(fs: dict, test) -> dict | None:
    """The published few-shot support sets of ``fs["published"]`` (``{source, split}``) as index arrays into the
    test set (matched by file name), or None when the analysis draws its own episodes."""
    where = fs.get("published")
    if not where:
        return None
    from umlkit.experiments.splits.committed import episodes_path, published_supports
    from umlkit.train.adapt import episodes_from_support_lists
    found = published_supports(where["source"], where["split"])
    if found is None:
        raise FileNotFoundError(f"{episodes_path()} holds no published episodes of {where['source']} split "
                                f"{where['split']}; run `umlkit oodml import-splits DATASPLITS_DIR` again")
    paths = [p for d in test.datasets for p in d.paths]
    return {k: episodes_from_support_lists(paths, lists) for k, lists in found.items()}


def _per_shot(value):
    """An analysis option given once or per shot count (``{2: 1000, 5: 1500}``; a record's JSON makes the keys text)."""
    return {int(k): int(v) for k, v in value.items()} if isinstance(value, dict) else int(value)


def _extra_analyses(out: dict, ana: dict, cfg: dict, resolved: dict, model, embed, sets, test_embedding,
                    metrics: list) -> None:
    """The optional parts of a ``train_analysis`` record, into ``out``: neighbour classes, embedding structure,
    few-shot adaptation and transfer to other sources (see :func:`train_analysis_run`)."""
    from umlkit.data import load_dataset
    from umlkit.metrics import embedding_structure, evaluate_retrieval, neighbour_class_counts, spectral_decay
    from umlkit.train.adapt import few_shot_adaptation
    train, test = sets
    feat, emb, labels = test_embedding
    if ana.get("neighbour_classes"):  # Fig. 3 of the language-guidance paper: retrieved classes per query class
        counts = neighbour_class_counts(emb, labels, int(ana["neighbour_classes"]))
        keys = test.class_keys()
        out["neighbour_classes"] = {keys[c]: {keys[j]: int(v) for j, v in enumerate(row) if v}
                                    for c, row in enumerate(counts) if row.any()}
    if ana.get("structure", False):
        _, tr_emb, tr_labels = embed(train)
        out["structure"] = {part: {**{k: round(v, 5) for k, v in embedding_structure(e, y).items()},
                                   "rho": round(spectral_decay(e), 5)}
                            for part, (e, y) in (("train", (tr_emb, tr_labels)), ("test", (emb, labels)))}
    fs = ana.get("few_shot")
    if fs:
        torch.manual_seed(int(cfg["seed"]))
        out["few_shot"] = few_shot_adaptation(
            model, feat, labels, shots=fs.get("shots", (2, 5)), episodes=int(fs.get("episodes", 10)),
            lr=float(cfg["optimizer"]["lr"]) * float(fs.get("lr_mult", 10.0)),
            iterations=_per_shot(fs.get("iterations", 1000)), beta=float(fs.get("beta", 1.2)),
            batch_size=int(cfg["data"]["batch_size"]), m=int(cfg["data"]["samples_per_class"]),
            metrics=[m for m in metrics if m != "MAP@R"] or ["R@1"], seed=int(cfg["seed"]),
            supports=_published_supports(fs, test))
    if ana.get("transfer"):
        from umlkit.train.engine import data_root_of
        root = data_root_of(resolved)
        out["transfer"] = {}
        for other in ana["transfer"]:
            ds = load_dataset(other, root, "test", transform=test.transform, cache=cfg["data"]["cache"])
            _, e, y = embed(ds)
            out["transfer"][SOURCE_NAMES.get(other, other)] = _percent(evaluate_retrieval(e, y, metrics=metrics))
