"""Language guidance (Roth, Vinyals and Akata, "Integrating language guidance into vision-based deep metric
learning", CVPR 2022): configurations, language files, tables and claims as data for the book's chapter.

* **Runs** (:func:`run_config`): the paper trains on Roth's pipeline, the one ooDML runs, so a row is ooDML's
  configuration of its base method on the source's default split (:func:`umlkit.experiments.oodml.run_config`:
  the same loss, chosen learning rate, sampler and epochs) plus, for a guided row, the language term
  ``omega x LanguageGuidanceLoss`` (Eq. 2; :mod:`umlkit.losses.language_guidance` follows the official
  ``LanguageGuide.regularize``). Every run is a ``train_analysis`` record keyed by the resolved configuration,
  with the language file referred to by its sha256 and its path ``results/<profile>/language/<file>`` (resolved
  against the results folder, so that keys are the same on every machine).
* **Language files** (:func:`language_ref`): ELG embeds each class's cleaned name (the loaders' ``language_names``,
  as the official ``language_conversion``); PLG embeds the top-k pseudolabels of a classifier averaged over each
  class's images (official ``relabel``). Quick: the sentence model all-MiniLM-L6-v2 and the tiny ViT v2's named
  320-way pretraining classifier; full: CLIP ViT-B/32's text encoder and torchvision's ImageNet ResNet-50
  (timm ``resnet50.tv_in1k``, the official ``pretrainedmodels`` weights) with the ImageNet class names.
* **Tuning** (:func:`omega_sweep`): the learning rate is the base method's (chosen by ooDML's protocol on the
  validation split of the CUB-like default split's training classes); omega is chosen on that same validation
  split from ``omega_grid``, for every (method, guidance) row - the paper's protocol of adding guidance to a tuned
  baseline, applied to every guided row alike.
* **Tables**: Table 2 (R@1 of every method with and without ELG / PLG on the CUB-, Cars- and SOP-like sources)
  and Table S1 (the same runs with NMI and mAP@1000), with the paper's claims.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from functools import lru_cache, partial
from pathlib import Path

import yaml

from umlkit.experiments import oodml
from umlkit.experiments.prose import method_value as _value, number as _num, verdict_counts as _verdict_counts
from umlkit.experiments.records import MissingSideFile, is_read_only
from umlkit.experiments.runners import SOURCE_NAMES
from umlkit.experiments.registry import Paper
from umlkit.experiments.tuning import chosen
from umlkit.experiments.tables import Claim, Row, Table
from umlkit.paper import paper_table

__all__ = ["PAPER", "SOURCES", "lg_config", "language_ref", "run_config", "omega_jobs", "job_list", "TABLES",
           "guided_rows", "chosen_omega", "guidance_spec", "variant_rows", "ABLATIONS", "ablation_table",
           "convergence_table", "similarities"]

PAPER = "language_guidance"
SOURCES = ("cub", "cars", "sop")
SEEDS = (0, 1, 2)
# "about as good" in the paper's text is tested as "within 1 R@1 point" (TOST, tables.claim_test); the paper's own
# gaps behind those readings (PLG vs ELG in Table 2, the language models of Table 3 (a)) are computed by
# paper_equivalence_gaps and shown beside it in the chapter
MARGIN = 1.0
BASELINE = "Multisimilarity"   # the ablation tables' "Baseline" (the paper's Tables 3-5 and S3 vary ELG on it)


def _config_dir() -> Path:
    from umlkit._paths import repo_folder
    return repo_folder("configs", "language_guidance", what="the language-guidance experiments")


@lru_cache(maxsize=1)
def lg_config() -> dict:
    """``configs/language_guidance/language_guidance.yaml``, parsed once per process."""
    from umlkit.train.config import _coerce
    return _coerce(yaml.safe_load((_config_dir() / "language_guidance.yaml").read_text()))


# what a guidance's language rows come from: per class (class names, pseudolabels averaged over a class's images,
# UML-Mini's attributes or attribute tree) or per image (captions, captions with the class name inserted, each
# image's own pseudolabels), the per-image kinds with the loss option per_sample
NAME_KINDS = ("class", "pseudolabels", "attributes", "hierarchy", "captions", "captions+insertion",
              "sample pseudolabels")
PER_IMAGE = ("captions", "captions+insertion", "sample pseudolabels")


def guidance_spec(name: str) -> dict:
    """The resolved guidance of a row suffix ("ELG", "PLG Top-5" or a variant): ``names`` (one of
    :data:`NAME_KINDS`), ``k``, ``model`` and ``template`` (None: the profile's language model, the primer),
    ``shuffle`` (None or a seed), ``loss`` (options over the shared ``loss`` block) and ``base`` (the guidance a
    variant changes; itself for ELG and PLG)."""
    cfg = lg_config()
    if name in cfg["guidance"]:
        g, base = dict(cfg["guidance"][name]), name
    elif name in (cfg.get("variants") or {}):
        v = dict(cfg["variants"][name])
        base = v.pop("from")
        g = {**cfg["guidance"][base], **v}
    else:
        raise KeyError(f"unknown guidance {name!r}; choose from {list(cfg['guidance'])} or a variant "
                       f"{list(cfg.get('variants') or {})}")
    spec = {"names": "class", "k": 1, "model": None, "template": None, "shuffle": None, "loss": {},
            "profiles": ["quick", "full"], **g, "base": base}
    if spec["names"] not in NAME_KINDS:
        raise ValueError(f"guidance {name!r}: names must be one of {', '.join(NAME_KINDS)}, got {spec['names']!r}")
    return spec


def variant_rows(profile: str = "quick") -> list[str]:
    """The ablation rows a profile runs: "Multisimilarity + <variant>" (Tables 3-5, S3 and the controls)."""
    return [f"{BASELINE} + {v}" for v in (lg_config().get("variants") or {}) if profile in guidance_spec(v)["profiles"]]


UNIFIED = "unified"   # the pseudo-source of the unified setting: PUMA's eight sources on PUMA's data


def _parts_of(source: str) -> list[tuple[str, str]]:
    """(dataset, loader split) pairs whose classes a language file covers: both splits of one source (ooDML's splits
    move classes between them), or the training split of each of PUMA's eight sources (unified: only training
    classes meet the loss)."""
    from umlkit.data.unified import PUMA_ORDER
    if source == UNIFIED:
        return [(n, "train") for n in PUMA_ORDER]
    return [(source, "train"), (source, "test")]


def _base_config(source: str, profile: str) -> dict:
    """The configuration whose data a language file describes: PUMA's for the unified setting, else ooDML's."""
    if source == UNIFIED:
        from umlkit.experiments import puma
        return puma.run_config(profile)
    return oodml.run_config(profile, source=source)


def _source_root(source: str, profile: str):
    if profile == "quick":
        from umlkit.data.mini import ensure_mini
        return ensure_mini() if source == UNIFIED else ensure_mini(size="large")
    from umlkit.train.engine import data_root_of
    return data_root_of(_base_config(source, profile))


def _key_path(path: str | Path, profile: str) -> str:
    """How a record key names a language file: ``results/<profile>/language/<file>``, wherever the results folder
    is (the engine resolves it against ``UMLKIT_RESULTS``, then the checkout), so that keys are the same on every
    machine."""
    return f"results/{profile}/language/{Path(path).name}"


def _source_classes(source: str, profile: str):
    """(row names, language names, [dataset per loader split]) of every class a language file covers
    (:func:`_parts_of`)."""
    from umlkit.data import load_dataset
    from umlkit.data.language import class_texts
    root = _source_root(source, profile)
    parts = [load_dataset(name, root, split) for name, split in _parts_of(source)]
    rows, texts = [], []
    for ds in parts:
        r, t = class_texts(ds)
        rows += r
        texts += t
    return rows, texts, parts


def _pseudolabel_texts(source: str, profile: str, k: int) -> tuple[list[str], list[list[str]]]:
    """Row names and the top-k pseudolabels of every class a language file covers (PLG), logits averaged over each
    class's images: quick, the tiny ViT v2's named 320-way classifier (:func:`umlkit.models.pretrain.class_logits`);
    full, an ImageNet ResNet-50 with the ImageNet class names (:func:`imagenet_pseudolabels`, the official
    ``relabel``)."""
    from umlkit.data import load_dataset
    root = _source_root(source, profile)
    if profile != "quick":
        c = lg_config()["plg_classifier"]
        tf = imagenet_transform(c["resize"], c["crop"])
        parts = [load_dataset(name, root, split, transform=tf) for name, split in _parts_of(source)]
        return imagenet_pseudolabels(parts, k, imagenet_classifier(c["model"], c["weights"]), imagenet_names(),
                                     batch_size=int(c["batch_size"]))
    from umlkit.models.pretrain import class_names
    rows, out = [], []
    for name, split in _parts_of(source):
        ds, logits, labels = _quick_logits(name, root, split)
        _add_class_tops(rows, out, ds, logits, labels, class_names(), k)
    return rows, out


def _quick_logits(name: str, root, split: str):
    """(dataset, logits, labels) of one loader split under the tiny ViT v2's named 320-way classifier (quick PLG)."""
    import torch

    from umlkit.data import build_transforms, load_dataset
    from umlkit.models.backbones import backbone_data_config, create_backbone
    from umlkit.models.pretrain import class_logits, load_heads, weight_files
    from umlkit.train.evaluate import extract_embeddings
    files = weight_files("v2")
    model = create_backbone("vit_tiny_uml_patch8_32", weights=files["weights"]).eval()
    heads = load_heads(files["heads"]).eval()
    tf = build_transforms("mini", backbone_data_config("vit_tiny_uml_v2"), train=False)
    ds = load_dataset(name, root, split, transform=tf, cache=True)
    feats, labels = extract_embeddings(model, ds, batch_size=512)
    with torch.no_grad():
        return ds, class_logits({n: h(feats) for n, h in heads.items()}).numpy(), labels


def _image_texts(source: str, profile: str, kind: str, k: int) -> tuple[list[str], list]:
    """(image keys, texts) of every image a per-image language file covers (both loader splits, as
    :func:`_parts_of`): its caption, its caption with the class name inserted
    (:func:`umlkit.data.names.insert_class_name`), or its own top-k pseudolabels (quick: the tiny ViT v2's named
    classifier, as :func:`_pseudolabel_texts` but per image)."""
    from umlkit.data import load_dataset
    from umlkit.data.language import pseudolabels
    from umlkit.data.names import insert_class_name
    if profile != "quick":
        raise NotImplementedError(f"per-image guidance ({kind}) is built for the quick profile (UML-Mini's captions, "
                                  "the tiny ViT's classifier); the full profile has no caption model or per-image "
                                  "ImageNet pseudolabels yet")
    root = _source_root(source, profile)
    keys, texts = [], []
    if kind == "sample pseudolabels":
        from umlkit.models.pretrain import class_names
        for name, split in _parts_of(source):
            ds, logits, labels = _quick_logits(name, root, split)
            top = pseudolabels(logits, labels, class_names(), k=k, per="sample")
            keys += ds.sample_keys
            texts += [top[i] for i in range(len(ds))]
        return keys, texts
    for name, split in _parts_of(source):
        ds = load_dataset(name, root, split)
        if ds.captions is None:
            raise ValueError(f"{name}/{split} under {root} has no captions (UML-Mini v2's uml_mini_text.tsv)")
        keys += ds.sample_keys
        if kind == "captions":
            texts += ds.captions
        else:
            texts += [insert_class_name(c, ds.language_names[int(y)]) for c, y in zip(ds.captions, ds.labels)]
    return keys, texts


def _add_class_tops(rows: list, out: list, ds, logits, labels, names, k: int) -> None:
    """Append one dataset's row names (``"<source>#<class key>"``) and each class's top-k names (logits averaged
    over the class's images, :func:`umlkit.data.language.pseudolabels`) to ``rows`` and ``out``."""
    from umlkit.data.language import pseudolabels
    top = pseudolabels(logits, labels, names, k=k)
    rows += [f"{ds.name}#{key}" for key in ds.class_keys]
    out += [top[c] for c in range(len(ds.class_names))]


# ------------------------------------------------------------------------------------------------ full-profile PLG
def imagenet_names() -> list[str]:
    """The 1,000 ImageNet class names as the official ``relabel`` uses them: the first comma-separated synonym of each
    class's description ("tench, Tinca tinca" -> "tench"), from timm's ImageNet metadata (the same synsets in the same
    order as the official ``imagenet_classes.txt``)."""
    from timm.data import ImageNetInfo
    info = ImageNetInfo()
    return [info.index_to_description(i).split(",")[0].strip() for i in range(info.num_classes())]


def imagenet_transform(resize: int = 320, crop: int = 299):
    """The official pseudolabel transform: Resize(320), CenterCrop(299), ImageNet normalisation."""
    import torchvision.transforms as T
    return T.Compose([T.Resize(resize), T.CenterCrop(crop), T.ToTensor(),
                      T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])


def imagenet_classifier(model: str = "resnet50.tv_in1k", weights: str | None = None):
    """An ImageNet classifier with its 1,000-way head (timm), from a local ``weights`` file or timm's hub copy; offline
    without a cached copy it fails within seconds, naming the file to download (the backbones' check)."""
    import timm

    from umlkit.models.backbones import _hub_source, _in_hf_cache, hub_unreachable
    if weights is not None:
        path = Path(weights).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"plg_classifier.weights: {path} does not exist (expected a checkpoint of {model}, "
                                    f"e.g. its model.safetensors)")
        try:
            return timm.create_model(model, pretrained=True, pretrained_cfg_overlay=dict(file=str(path), hf_hub_id=None,
                                                                                         url=None)).eval()
        except Exception as err:
            raise ValueError(f"plg_classifier.weights: {path} cannot be loaded into {model} ({type(err).__name__}: "
                             f"{str(err).splitlines()[0][:200] if str(err) else ''})") from err
    cfg = timm.models.get_pretrained_cfg(model)
    if cfg is not None and not _in_hf_cache(cfg):
        reason = hub_unreachable()
        if reason is not None:
            raise ConnectionError(f"PLG's classifier {model} is not in the Hugging Face cache and the hub is "
                                  f"unreachable ({reason}); download {_hub_source(cfg)} and set plg_classifier.weights "
                                  f"in configs/language_guidance/language_guidance.yaml")
    return timm.create_model(model, pretrained=True).eval()


def imagenet_pseudolabels(datasets, k: int, classifier, names: list[str], batch_size: int = 64):
    """(row names, top-k names per class) over ``datasets`` (each with ``name``, ``class_keys``, ``class_names``;
    items (image, label)): the classifier's logits averaged over each class's images, as the official ``relabel``."""
    import torch
    rows, out = [], []
    for ds in datasets:
        loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=False)
        logits, labels = [], []
        with torch.no_grad():
            for x, y in loader:
                logits.append(classifier(x).float())
                labels.append(y)
        _add_class_tops(rows, out, ds, torch.cat(logits).numpy(), torch.cat(labels).numpy(), names, k)
    return rows, out


def _identity(source: str, guidance: str, profile: str, model: str, template: str, shuffle_seed) -> str:
    """What decides a language file, without computing it: the source's data (its fingerprint: UML-Mini's generator
    version and seed, or the real annotation files), the guidance (names and k, or the classifier's weights), the
    language model, the primer, the shuffle seed, and :data:`umlkit.data.language.FILE_VERSION` - the version of the
    code that names classes and encodes them (``umlkit.data.names`` and ``umlkit.data.language``), bumped when a
    change there changes what a file holds; a test pins the texts a quick file is made from, so that such a change
    without a bump fails.

    Not the code files' bytes: an edit of an error message in those modules changed every identity, the committed
    index found none of its files, and reading the book recomputed them (and, on another CPU, gave them new sha256s
    and the records new keys)."""
    import hashlib
    import json

    from umlkit.data import language
    from umlkit.experiments.fingerprint import data_fingerprint
    from umlkit.results import file_sha256 as sha
    spec = guidance_spec(guidance)
    g = {"names": spec["names"], "k": spec["k"]}
    parts = {"source": source, "data": data_fingerprint(_base_config(source, profile)), "guidance": g,
             "model": model, "template": template, "shuffle": shuffle_seed, "version": language.FILE_VERSION}
    if g["names"] in ("attributes", "hierarchy"):   # no language model reads anything: model and primer play no part
        parts.update(model=None, template=None)
    if g["names"] in ("pseudolabels", "sample pseudolabels") and profile == "quick":
        from umlkit.models.pretrain import weight_files
        parts["classifier"] = {k: sha(weight_files("v2")[k]) for k in ("weights", "heads")}
    elif g["names"] in ("pseudolabels", "sample pseudolabels"):
        parts["classifier"] = dict(lg_config()["plg_classifier"])
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


_REFS: dict[tuple, dict] = {}


def language_ref(source: str, guidance: str, profile: str = "quick", model: str | None = None,
                 template: str | None = None, shuffle_seed: int | None = None) -> dict:
    """``{file, sha256}`` of the language file a guided row of ``source`` trains with (written on first use under
    ``results/<profile>/language/``); the path is repository-relative when the file is inside the checkout.

    ``results/<profile>/language/index.json`` maps what decides a file (:func:`_identity`: data, guidance,
    classifier weights, language model, primer) to its name, so a chapter or the scoreboard finds a stored file
    without loading the language model or recomputing pseudolabels; the file's own sha256 stays its identity in
    the record key. Inside :func:`umlkit.experiments.records.read_only` a file that is not stored raises
    :class:`~umlkit.experiments.records.MissingSideFile` (its rows count as missing records) and nothing is
    written."""
    import json

    from umlkit._paths import results_root
    from umlkit.results import _atomic_write, file_lock
    cfg = lg_config()
    g = guidance_spec(guidance)
    model = model or g["model"] or cfg["language_model"][profile]
    template = template or g["template"] or cfg["template"]
    shuffle_seed = shuffle_seed if shuffle_seed is not None else g["shuffle"]
    memo = (source, guidance, profile, model, template, shuffle_seed, str(results_root(profile)))
    folder = results_root(profile) / "language"
    if memo in _REFS and (folder / Path(_REFS[memo]["file"]).name).is_file():   # a file removed since is looked up
        return dict(_REFS[memo])
    index_path = folder / "index.json"
    ident = _identity(source, guidance, profile, model, template, shuffle_seed)
    if is_read_only():   # reading never computes a file, takes the lock or touches the index
        index = json.loads(index_path.read_text()) if index_path.is_file() else {}
        ref = _lookup(folder, index, ident, profile)
        if ref is None:
            where = (f"{index_path} names {index[ident]} for identity {ident}, which is not there" if ident in index
                     else f"identity {ident} is not in {index_path}")
            raise MissingSideFile(f"no stored language file for {source} / {guidance} ({profile}: {where}); "
                                  f"`umlkit records train language_guidance ...` makes it")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        with file_lock(folder / ".lock"):  # two record workers must not compute the same file or lose index entries
            index = json.loads(index_path.read_text()) if index_path.is_file() else {}
            ref = _lookup(folder, index, ident, profile)
            if ref is None:
                ref = _make(source, guidance, profile, model, template, shuffle_seed, g)
                index[ident] = Path(ref["file"]).name
                _atomic_write(index_path, json.dumps(dict(sorted(index.items())), indent=1))
    _REFS[memo] = ref
    return dict(ref)


def _lookup(folder: Path, index: dict, ident: str, profile: str) -> dict | None:
    from umlkit.results import file_sha256
    if ident in index and (folder / index[ident]).is_file():
        path = folder / index[ident]
        return {"file": _key_path(path, profile), "sha256": file_sha256(path)}
    return None


def _make(source, guidance, profile, model, template, shuffle_seed, g) -> dict:
    from umlkit.data.language import language_file
    if g["names"] in ("attributes", "hierarchy"):
        return _attribute_file(source, profile, g["names"], shuffle_seed)
    if g["names"] in PER_IMAGE:
        from umlkit.data.language import sample_language_file
        keys, texts = _image_texts(source, profile, g["names"], int(g["k"]))
        made = sample_language_file(keys, texts, model, template, profile=profile, tag=source)
        return {"file": _key_path(made["file"], profile), "sha256": made["sha256"]}
    if g["names"] == "class":
        rows, texts, _ = _source_classes(source, profile)
    else:
        rows, texts = _pseudolabel_texts(source, profile, int(g["k"]))
    made = language_file(rows, texts, model, template, shuffle_seed=shuffle_seed, profile=profile, tag=source)
    return {"file": _key_path(made["file"], profile), "sha256": made["sha256"]}


def _attribute_file(source: str, profile: str, kind: str, shuffle_seed) -> dict:
    """The controls without a language model (quick only: UML-Mini's classes are defined by attributes it draws):
    each class's attribute vector (:func:`umlkit.data.language.attribute_vectors`, cosine = attribute overlap) or its
    leaf vector on the attribute tree (:func:`~umlkit.data.language.hierarchy_vectors`, cosine = path similarity)."""
    import hashlib

    import numpy as np

    from umlkit._paths import results_root
    from umlkit.data import language
    from umlkit.data.mini import class_attributes
    if profile != "quick" or source == UNIFIED:
        raise NotImplementedError(f"the {kind!r} control needs the attributes that define each class, which only "
                                  f"UML-Mini (the quick profile) has; real datasets would need attribute annotations")
    rows, _, _ = _source_classes(source, profile)
    attrs = [language.name_attributes(source, a) for a in class_attributes(source, size="large")]
    if len(attrs) != len(rows):
        raise RuntimeError(f"{source}: {len(attrs)} class attribute sets for {len(rows)} classes")
    # the attributes are words already (name_attributes): every value is a category, none is binned
    emb = (language.attribute_vectors if kind == "attributes" else language.hierarchy_vectors)(attrs, continuous=())
    if shuffle_seed is not None:
        emb = language.shuffle_rows(emb, shuffle_seed)
    digest = hashlib.sha256(np.ascontiguousarray(np.round(emb, 5)).tobytes() + "\n".join(rows).encode()).hexdigest()
    tail = f"-shuffled{shuffle_seed}" if shuffle_seed is not None else ""
    path = results_root(profile) / "language" / f"{source}-{kind}{tail}-{digest[:12]}.npz"
    made = language.embeddings_file(rows, np.round(emb, 5), path)
    return {"file": _key_path(made["file"], profile), "sha256": made["sha256"]}


def _split_row(method: str) -> tuple[str, str | None]:
    """'Margin + PLG Top-5' -> ('Margin', 'PLG Top-5'); 'Multisimilarity + S2SD' -> (that, None)."""
    for g in [*lg_config()["guidance"], *(lg_config().get("variants") or {})]:
        if method.endswith(f" + {g}"):
            return method[: -len(g) - 3], g
    return method, None


def chosen_omega(method: str, guidance: str, source: str, profile: str) -> float:
    """The configured omega of "<method> + <guidance>" in a profile; a variant the profile gives none (full: the
    official scripts tune no ablation) takes its base guidance's."""
    rows = [f"{method} + {guidance}"]
    base = guidance_spec(guidance)["base"]
    if profile == "full" and base != guidance:
        rows.append(f"{method} + {base}")
    paths = [p for r in rows for p in ((profile, r, source), (profile, r))]   # per source, or one for every source
    return chosen(lg_config()["omega"], paths, file="configs/language_guidance/language_guidance.yaml",
                  what=f"{profile} omega for {method + ' + ' + guidance!r}", sweep="run the omega sweep (`umlkit "
                  "records train language_guidance omega_sweep`) and enter the chosen omega")


def run_config(profile: str = "quick", *, method: str = "Multisimilarity", source: str = "cub", seed: int = 0,
               omega: float | None = None, validation: bool = False, language: dict | None = None,
               overrides=()) -> dict:
    """The resolved configuration of one row (``method`` as the paper spells it, e.g. "Margin + ELG"): ooDML's
    configuration of the base method on the default split, the row's loss options, and for a guided row the
    language term with weight ``omega`` (default: the chosen one) and the file ``language`` (default:
    :func:`language_ref`)."""
    cfg = lg_config()
    base, guidance = _split_row(method)
    if base not in cfg["methods"]:
        raise KeyError(f"unknown language-guidance method {base!r}; choose from {list(cfg['methods'])} (optionally "
                       f"with ' + ' and one of {list(cfg['guidance'])})")
    block = cfg["methods"][base]
    extra = (cfg.get("profile_overrides") or {}).get(profile) or []
    out = oodml.run_config(profile, method=block["base"], source=source, seed=seed, validation=validation,
                           overrides=[*extra, *overrides])
    out = copy.deepcopy(out)
    out["objective"][0]["options"].update(block.get("options") or {})
    if guidance is not None:
        w = float(omega) if omega is not None else chosen_omega(base, guidance, source, profile)
        ref = language if language is not None else language_ref(source, guidance, profile)
        out["objective"].append({"name": "language_guidance", "weight": w,
                                 "options": {**cfg["loss"], **guidance_spec(guidance)["loss"],
                                             "language_embeddings": ref}})
    out["name"] = f"language_guidance-{source}-{method}"
    return out


def _analysis() -> dict:
    return {"metrics": list(lg_config()["metrics"])}


def guided_rows() -> list[str]:
    """Every row of Table 2 in the paper's order: each method, then with each guidance."""
    cfg = lg_config()
    return [m if g is None else f"{m} + {g}" for m in cfg["methods"] for g in (None, *cfg["guidance"])]


# ------------------------------------------------------------------------------------------------ tuning
def omega_grid(row: str, block: dict | None = None) -> list[float]:
    """The omega values a guided row is validated at: the shared grid, extended for the rows whose best value lay
    on its edge (``omega_grid_extra``); ``block`` is the configuration block that holds both (default: the
    paper's rows; the unified setting passes its own)."""
    cfg = lg_config() if block is None else block
    return sorted({float(w) for w in [*cfg["omega_grid"], *(cfg.get("omega_grid_extra") or {}).get(row, [])]})


def omega_key(method: str, omega: float, profile: str = "quick", seed: int = 0) -> dict:
    """The record key of one validation run of the omega sweep (CUB-like default split, held-out training classes)."""
    return {"config": run_config(profile, method=method, source="cub", seed=seed, omega=omega, validation=True),
            "analysis": {"metrics": ["R@1", "MAP@R"]}}


def omega_jobs(profile: str = "quick", seed: int = 0) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of the sweep: every guided row x ``omega_grid``, and each base method without
    guidance (the reference the sweep's gain is read against)."""
    jobs = []
    for row in [*guided_rows(), *(variant_rows(profile) if profile == "quick" else [])]:
        _, g = _split_row(row)
        if g is None:
            key = {"config": run_config(profile, method=row, source="cub", seed=seed, validation=True),
                   "analysis": {"metrics": ["R@1", "MAP@R"]}}
            jobs.append(("omega_sweep", f"{row}-seed{seed}", key))
        else:
            jobs += [("omega_sweep", f"{row}-w{w:g}-seed{seed}", omega_key(row, float(w), profile, seed))
                     for w in omega_grid(row)]
    return jobs


# ------------------------------------------------------------------------------------------------ tables
def config_for(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    sp = row.spec
    return {"config": run_config(profile, method=sp["method"], source=sp["source"], seed=seed, overrides=overrides),
            "analysis": _analysis()}


def _scores_in(metrics) -> Callable[[dict, Row], dict]:
    """A table's scores: ``{(dataset, metric): value}`` of a record's test scores in ``metrics``."""
    def scores(result: dict, row: Row) -> dict:
        return {(d, m): v for m, per in result["test"].items() for d, v in per.items() if m in metrics}
    return scores


def _label(source: str, run: str) -> str:
    """A record label: "cub-Margin+PLG_Top-5"."""
    return f"{source}-{run.replace(' + ', '+').replace(' ', '_')}"


def _cell(method: str, dataset: str) -> dict:
    setting = "beta=1.2" if method.startswith("Margin") else ""
    return {"section": "", "method": method, "setting": setting, "dataset": dataset}


def _rows() -> list[Row]:
    return [Row(method=m, setting="beta=1.2" if m.startswith("Margin") else "", spec={"method": m, "source": s},
                runner="train_analysis", group=s, label=_label(s, m))
            for s in SOURCES for m in guided_rows()]


def _claims(metric: str = "R@1") -> list[Claim]:
    """"<method> + <guidance> beats <method>" on every source where the paper prints both cells (Table 2, completed
    from Table S1: :data:`umlkit.paper.FILL_FROM`) and guidance wins there (Sec. 4.2: clear gains on CUB and Cars,
    small ones on SOP, where MS + ELG equals MS), and "PLG matches ELG within MARGIN" for every method and source."""
    p = paper_table(PAPER, "Table 2").fillna({"section": "", "setting": ""})
    p = p[p["metric"] == metric]
    value = {(r["method"], r["dataset"]): r["value"] for _, r in p.iterrows()}
    out = []
    for m in lg_config()["methods"]:
        for g in lg_config()["guidance"]:
            for s in SOURCES:
                d = SOURCE_NAMES[s]
                a, b = value.get((f"{m} + {g}", d)), value.get((m, d))
                if a is not None and b is not None and a > b:
                    out.append(Claim(f"{m} + {g} beats {m} ({d})", _cell(f"{m} + {g}", d), _cell(m, d), metric))
    for m in lg_config()["methods"]:   # Sec. 4.2: PLG is about as good as ELG
        for s in SOURCES:
            d = SOURCE_NAMES[s]
            if (f"{m} + PLG Top-5", d) in value and (f"{m} + ELG", d) in value:
                out.append(Claim(f"{m} + PLG Top-5 matches {m} + ELG within {MARGIN:g} ({d})",
                                 _cell(f"{m} + PLG Top-5", d), _cell(f"{m} + ELG", d), metric, margin=MARGIN))
    return out


def table(name: str = "Table 2", profile: str = "quick") -> Table:
    """Table 2 (R@1) or Table S1 (R@1, NMI, mAP@1000) - the same runs -, an ablation table (3, S2, 4, 5, S3) or the
    controls (:func:`ablation_table`)."""
    if name in ABLATIONS:
        return ablation_table(name, profile)
    if name not in ("Table 2", "Table S1"):
        raise KeyError(f"language-guidance tables: Table 2, Table S1, {', '.join(ABLATIONS)}; not {name!r}")
    return Table(PAPER, name, _rows(), config_for, seeds=SEEDS, scores=_scores_in(("R@1", "NMI", "mAP@1000")),
                 claims=_claims() if name == "Table 2" else [], params=False,
                 unmeasured={"quick": "not measured in this profile"})


# ------------------------------------------------------------------------------------------------ ablations
_Q, _F, _QF = ("quick",), ("full",), ("quick", "full")
_NO_CAPTIONS = ("full-profile only through the quick stand-ins: the full profile has no caption model and no "
                "per-image ImageNet pseudolabels yet")
_HUB_ONLY = "full-profile only: the language model's weights come from the Hugging Face hub"
# (section, the paper's row, the run's row, the profiles that measure it). The run's row is a Table 2 row or
# "Multisimilarity + <variant>" (configs/language_guidance/language_guidance.yaml: variants); the same run shows up
# in every table that lists it (e.g. the quick ELG run is "Baseline + ELG" of Tables 4, 5, S3 and "Baseline +
# MiniLM" of Table 3). Rows without a paper value are the quick profile's own (stand-ins, controls).
ABLATIONS: dict[str, dict] = {
    "Table 1": {"rows": [],   # quoted: other methods' published results; the paper's own rows are 128/512-d runs of
                              # Table 2's recipe at other embedding sizes and backbones, not run here
        "columns": ["CUB", "Cars", "SOP"], "metrics": ("R@1", "NMI"),
        "unmeasured": {p: {"*": "quoted: another method's published result",
                           "Multisimilarity + PLG": "not run: Table 2's recipe at this backbone and embedding size",
                           "S2SD + PLG": "not run: Table 2's recipe at this backbone and embedding size"}
                       for p in _QF}},
    "Table 3": {"rows": [
        ("", "Baseline", BASELINE, _QF),
        ("", "Baseline + MiniLM", f"{BASELINE} + ELG", _Q),
        ("", "Baseline + CLIP-B/32", f"{BASELINE} + ELG", _F),
        ("(a) Language Models", "Baseline + BERT", f"{BASELINE} + BERT", _F),
        ("(a) Language Models", "Baseline + Roberta-L", f"{BASELINE} + Roberta-L", _F),
        ("(a) Language Models", "Baseline + GPT2", f"{BASELINE} + GPT2", _F),
        ("(b) Word Embeddings", "Baseline + MiniLM tokens", f"{BASELINE} + MiniLM tokens", _Q),
        ("(c) Word Hierarchies", "Baseline + attribute tree", f"{BASELINE} + attribute tree", _Q)],
        "unmeasured": {"quick": {"*": _HUB_ONLY + " (the quick stand-ins are the MiniLM rows and the attribute tree)",
                                 "Baseline + CLIP-L": "the quick profile's language model is MiniLM (row 'Baseline + "
                                                      "MiniLM'); the full profile runs CLIP ViT-B/32, the official "
                                                      "code's default",
                                 "Baseline + FastText": "no offline back end; stand-in: 'Baseline + MiniLM tokens'",
                                 "Baseline + GloVe": "no offline back end; stand-in: 'Baseline + MiniLM tokens'",
                                 "Baseline + WordNet": "no offline back end; stand-in: 'Baseline + attribute tree'",
                                 "Baseline + HierMatch": "not built (hierarchical matching of WordNet synsets)",
                                 "Baseline + Top 3": "not built (an ensemble of the three best language models)"},
                       "full": {"*": "not built: no back end for this language model yet",
                                "Baseline + CLIP-L": "the full profile runs CLIP ViT-B/32 (the official code's "
                                                     "default), row 'Baseline + CLIP-B/32'"}}},
    "Table 4": {"rows": [
        ("", "Baseline", BASELINE, _QF),
        ("", "Baseline + ELG", f"{BASELINE} + ELG", _QF),
        ("(a) Vision-Language representation matching", "DeVise-Style", f"{BASELINE} + DeVise-Style", _QF),
        ("(a) Vision-Language representation matching", "CLIP-style", f"{BASELINE} + CLIP-style", _QF),
        ("(b) Methods of incorporation", "Row-wise L2", f"{BASELINE} + Row-wise L2", _QF),
        ("(b) Methods of incorporation", "Full Similarity", f"{BASELINE} + Full Similarity", _QF),
        ("(b) Methods of incorporation", "No stop grad.", f"{BASELINE} + No stop grad.", _QF)],
        "unmeasured": {p: {"ViT Prediction": "not built (a ViT over the feature map predicting the language embedding)",
                           "Mining mask": "not built (language similarities as a mining mask)",
                           "Weight scaling": "not built (language similarities as loss weights)"}
                       for p in _QF}},
    "Table 5": {"rows": [
        ("", "Baseline", BASELINE, _QF),
        ("", "Baseline + ELG", f"{BASELINE} + ELG", _QF),
        ("", "Classname only", f"{BASELINE} + class name only", _QF),
        ("", "Other primer", f"{BASELINE} + other primer", _QF),
        ("", "Caption", f"{BASELINE} + caption", _Q),
        ("", "Caption + insertion", f"{BASELINE} + caption + insertion", _Q)],
        "unmeasured": {"quick": {"*": "the paper's text merges the four rows' labels and keeps one partial set of "
                                      "values"},
                       "full": {"*": "the paper's text merges the four rows' labels and keeps one partial set of "
                                     "values", "Caption": _NO_CAPTIONS, "Caption + insertion": _NO_CAPTIONS}}},
    "Table S3": {"rows": [
        ("", "Baseline", BASELINE, _QF),
        ("", "Baseline + ELG", f"{BASELINE} + ELG", _QF),
        ("Number of pseudolabels", "Baseline + PLG", f"{BASELINE} + PLG Top-1", _QF),
        ("Number of pseudolabels", "Baseline + PLG (Top-5)", f"{BASELINE} + PLG Top-5", _QF),
        ("Number of pseudolabels", "Baseline + PLG (Top-10)", f"{BASELINE} + PLG Top-10", _QF),
        ("Number of pseudolabels", "Baseline + PLG (Top-20)", f"{BASELINE} + PLG Top-20", _QF),
        ("Different pseudolabel matching methods", "Sample (Top-5)", f"{BASELINE} + PLG per-sample Top-5", _Q)],
        "unmeasured": {p: {"*": "not built: pseudolabels from the feature map's positions (Dense) and from several "
                                "classifiers (Multi)", "PLG+WordNet (Top-5)": "not built (WordNet)",
                           "pseudo-HierMatch": "not built (WordNet)",
                           **({"Sample (Top-5)": _NO_CAPTIONS} if p == "full" else {})} for p in _QF}},
    "Controls": {"rows": [
        ("", "Multisimilarity", BASELINE, _Q),
        ("", "Multisimilarity + ELG", f"{BASELINE} + ELG", _Q),
        ("", "+ ELG, shuffled names", f"{BASELINE} + ELG shuffled", _Q),
        ("", "+ attribute overlap (no language model)", f"{BASELINE} + attribute overlap", _Q),
        ("", "+ attribute tree (no language model)", f"{BASELINE} + attribute tree", _Q)],
        "columns": ["CUB", "Cars", "SOP"], "metrics": ("R@1", "mAP@1000", "MAP@R")},
}
ABLATIONS["Table S2"] = {**ABLATIONS["Table 3"], "rows": [r for r in ABLATIONS["Table 3"]["rows"]
                                                            if not r[0].startswith(("(b)", "(c)"))]}


def _ablation_claims(name: str) -> list[Claim]:
    """The paper's readings as claims on the cells a profile measures: Table 3 (Sec. 4.3), Table 4 (Sec. 4.4),
    Table 5 (Sec. 4.6), Table S3 (Supp. B.3), and the book's controls."""
    q = {"section": "", "setting": ""}
    cell = {r[1]: {**q, "section": r[0], "method": r[1]} for r in ABLATIONS[name]["rows"]}
    if name in ("Table 1", "Table S2"):   # Table S2 repeats Table 3's language models: its claims are Table 3's
        return []
    out = []
    for d in ("CUB", "Cars"):
        if name == "Table 4":
            out += [Claim(f"ELG's row-wise KL beats {alt} ({d})", {**cell["Baseline + ELG"], "dataset": d},
                          {**cell[alt], "dataset": d}) for alt in list(cell)[2:]]
        elif name == "Table S3":
            out += [Claim(f"PLG with the top-5 pseudolabels beats the top-1 ({d})",
                          {**cell["Baseline + PLG (Top-5)"], "dataset": d}, {**cell["Baseline + PLG"], "dataset": d}),
                    Claim(f"per-sample top-5 pseudolabels match per-class ones within {MARGIN:g} ({d})",
                          {**cell["Sample (Top-5)"], "dataset": d}, {**cell["Baseline + PLG (Top-5)"], "dataset": d},
                          margin=MARGIN)]
        elif name == "Table 5":   # Sec. 4.6: the primer's wording does not matter; class names beat captions,
            # and inserting the class name into the caption helps
            out += [Claim(f"ELG with '{alt}' matches the primer 'a photo of a' within {MARGIN:g} ({d})",
                          {**cell[alt], "dataset": d}, {**cell["Baseline + ELG"], "dataset": d}, margin=MARGIN)
                    for alt in ("Classname only", "Other primer")]
            out += [Claim(f"class names beat captions ({d})", {**cell["Baseline + ELG"], "dataset": d},
                          {**cell["Caption"], "dataset": d}),
                    Claim(f"inserting the class name into the caption beats the caption ({d})",
                          {**cell["Caption + insertion"], "dataset": d}, {**cell["Caption"], "dataset": d})]
        elif name == "Table 3":   # Sec. 4.3: the language model matters little; hierarchies guide less
            out += [Claim(f"static token embeddings match the sentence model within {MARGIN:g} ({d})",
                          {**cell["Baseline + MiniLM tokens"], "dataset": d}, {**cell["Baseline + MiniLM"], "dataset": d},
                          margin=MARGIN),
                    Claim(f"the sentence model beats the attribute tree ({d})", {**cell["Baseline + MiniLM"], "dataset": d},
                          {**cell["Baseline + attribute tree"], "dataset": d})]
    if name == "Controls":   # where the paper sees language help (not SOP, whose 8 names cover 1,000 classes)
        for d in ("CUB", "Cars"):
            out += [Claim(f"ELG with the right names beats ELG with shuffled names ({d})",
                          {**cell["Multisimilarity + ELG"], "dataset": d}, {**cell["+ ELG, shuffled names"], "dataset": d}),
                    Claim(f"the language model's similarities beat the attribute overlap ({d})",
                          {**cell["Multisimilarity + ELG"], "dataset": d},
                          {**cell["+ attribute overlap (no language model)"], "dataset": d})]
    return out


def ablation_table(name: str, profile: str = "quick") -> Table:
    """One of Tables 3, S2, 4, 5, S3 (CUB- and Cars-like sources, R@1 and mAP@1000) or the book's controls
    (every source): the rows of :data:`ABLATIONS` that ``profile`` measures; the paper's other rows get its reason."""
    spec = ABLATIONS[name]
    columns = spec.get("columns", ["CUB", "Cars"])
    metrics = spec.get("metrics", ("R@1", "mAP@1000"))
    sources = [s for s in SOURCES if SOURCE_NAMES[s] in columns]
    rows = [Row(method=m, section=sec, setting=rest[0] if rest else "", spec={"method": run, "source": s},
                runner="train_analysis", group=s, label=_label(s, run))
            for s in sources for sec, m, run, profiles, *rest in spec["rows"] if profile in profiles]
    return Table(PAPER, name, rows, config_for, seeds=SEEDS, scores=_scores_in(metrics),
                 claims=_ablation_claims(name) if profile == "quick" or name not in ("Controls", "Table 3") else [],
                 params=False,
                 unmeasured=spec.get("unmeasured", {}), columns=columns if name == "Controls" else None)


def quoted_table(name: str = "Table 1") -> "pd.DataFrame":  # noqa: F821
    """A table the book quotes rather than runs (Table 1: other methods' published results), R@1 per section."""
    p = paper_table(PAPER, name).fillna({"section": "", "setting": ""})
    p = p[p["metric"] == "R@1"]
    return p.pivot_table(index=["section", "method"], columns="dataset", values="value", sort=False)


CURVE_ROWS = (BASELINE, f"{BASELINE} + ELG", f"{BASELINE} + PLG Top-5")


def first_epoch(profile: str = "quick") -> int:
    """The first epoch the Table 2 runs evaluate (their ``train.eval_every``)."""
    return int(run_config(profile, method=BASELINE, source="cub")["train"]["eval_every"])


def convergence_table(profile: str = "quick") -> Table:
    """Fig. S1 as a table: R@1 on the test classes at every evaluated epoch (the records' curves) of Multi-Similarity
    without and with guidance - the same runs as Table 2 -, and the training time; the claim is the paper's reading
    that guidance helps early ("faster convergence"), checked at the first evaluated epoch."""
    rows = [r for r in _rows() if r.method in CURVE_ROWS]

    def scores(result: dict, row: Row) -> dict:
        out = {(d, f"R@1 epoch {c['epoch']}"): v for c in result.get("curves", []) for d, v in c["test"].items()
               if d == SOURCE_NAMES[row.group]}
        out[(SOURCE_NAMES[row.group], "train seconds")] = result["train_seconds"]
        return out
    first = first_epoch(profile)
    claims = [Claim(f"{m} is ahead of {BASELINE} at epoch {first} ({d})", _cell(m, d), _cell(BASELINE, d),
                    metric=f"R@1 epoch {first}") for m in CURVE_ROWS[1:] for d in ("CUB", "Cars")]
    return Table(PAPER, "Fig. S1", rows, config_for, seeds=SEEDS, scores=scores, claims=claims, params=False,
                 columns=[SOURCE_NAMES[s] for s in SOURCES])


# ------------------------------------------------------------------------------------------------ Fig. 3
SEMANTIC = {"source": "cub", "neighbours": 20, "related": 5, "judge": "ELG"}
"""Fig. 3 (Sec. 4.3): the top-``neighbours`` retrieved images of every test image of ``source``, counted per
retrieved class; the ``related`` test classes closest to a query class by the ``judge`` guidance's language rows
(the sentence model on the class names, for every row alike) are its semantically related classes."""


def semantic_config(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    """A Table 2 run's key with the neighbour counts of Fig. 3 added to its analysis (so a run of its own)."""
    key = config_for(row, seed, profile, overrides)
    return {**key, "analysis": {**key["analysis"], "neighbour_classes": SEMANTIC["neighbours"]}}


def class_similarity(source: str, guidance: str = "ELG", profile: str = "quick") -> "pd.DataFrame":  # noqa: F821
    """Cosine similarity of every class row of ``source``'s language file for ``guidance`` (PLG: averaged over the
    pseudolabel slots), indexed by row name ("cub#017")."""
    import numpy as np
    import pandas as pd

    from umlkit._paths import results_root
    ref = language_ref(source, guidance, profile)
    with np.load(results_root(profile) / "language" / Path(ref["file"]).name, allow_pickle=False) as f:
        names, emb = [str(x) for x in f["class_names"]], np.array(f["embeddings"], dtype=np.float64)
    e = emb[:, None, :] if emb.ndim == 2 else emb
    e = e / np.linalg.norm(e, axis=-1, keepdims=True)
    return pd.DataFrame(np.einsum("ikd,jkd->ijk", e, e).mean(-1), index=names, columns=names)


def related_classes(counts: dict, sim: "pd.DataFrame", n: int) -> dict[str, list[str]]:  # noqa: F821
    """For every query class of a record's ``neighbour_classes``, the ``n`` other test classes (those the record
    lists as queries) closest to it by ``sim``, closest first (ties by name)."""
    test = sorted(counts)
    out = {}
    for q in test:
        others = sorted((c for c in test if c != q), key=lambda c: (-float(sim.at[q, c]), c))
        out[q] = others[:n]
    return out


def semantic_shares(counts: dict, related: dict) -> dict[str, float]:
    """Percent of the retrieved neighbours, averaged over query classes: ``same class`` and ``related classes`` (of
    the neighbours from another class, the share from the query's related classes)."""
    import numpy as np
    same, rel = [], []
    for q, row in counts.items():
        total = sum(row.values())
        wrong = total - row.get(q, 0)
        same.append(row.get(q, 0) / total)
        if wrong:
            rel.append(sum(row.get(c, 0) for c in related[q]) / wrong)
    return {"same class": 100.0 * float(np.mean(same)), "related classes": 100.0 * float(np.mean(rel))}


def word_order_pairs(source: str = "cub", guidance: str = "ELG", profile: str = "quick") -> dict[str, float]:
    """How the language rows treat class names made of the same words in another order ("amber bird with a blue
    head" / "blue bird with an amber head", distinct classes): the number of such pairs among a source's classes, their
    lowest and mean cosine similarity, and the highest similarity of any other pair. Articles ("a"/"an") are ignored."""
    import numpy as np
    sim = class_similarity(source, guidance, profile)
    rows, texts, _ = _source_classes(source, profile)
    words = {r: sorted(w for w in t.lower().split() if w not in ("a", "an")) for r, t in zip(rows, texts)}
    same, other = [], []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            (same if words[a] == words[b] else other).append(float(sim.at[a, b]))
    return {"pairs": len(same), "min": float(np.min(same)) if same else float("nan"),
            "mean": float(np.mean(same)) if same else float("nan"), "other_max": float(np.max(other))}


def semantic_table(profile: str = "quick") -> Table:
    """Fig. 3 as a table: per row, the share of retrieved neighbours from the query's own class and from its
    semantically related classes, with the claims that guidance raises the related share (the paper's reading:
    "language-guided models retrieve more samples from semantically related classes")."""
    src = SEMANTIC["source"]
    d = SOURCE_NAMES[src]
    rows = [r for r in _rows() if r.method in CURVE_ROWS and r.group == src]
    judge: dict = {}   # the language similarities, read once per table when the first record is scored

    def scores(result: dict, row: Row) -> dict:
        if not judge:
            judge["sim"] = class_similarity(src, SEMANTIC["judge"], profile)
        counts = result["neighbour_classes"]
        rel = related_classes(counts, judge["sim"], SEMANTIC["related"])
        return {(d, m): v for m, v in semantic_shares(counts, rel).items()}
    claims = [Claim(f"{m} retrieves more from semantically related classes than {BASELINE} ({d})", _cell(m, d),
                    _cell(BASELINE, d), metric="related classes") for m in CURVE_ROWS[1:]]
    return Table(PAPER, "Fig. 3", rows, semantic_config, seeds=SEEDS, scores=scores, claims=claims, params=False,
                 columns=[d])


def semantic_counts(profile: str = "quick", queries: int = 4) -> "pd.DataFrame":  # noqa: F821
    """The figure's data: for ``queries`` test classes (those whose images the baseline most often confuses with
    other classes, over its seeds), the query and its ``related - 1`` closest classes, with the mean retrieved count
    per row over seeds. Columns: query, rank (0 = the query class), class, similarity, method, count."""
    import numpy as np
    import pandas as pd

    from umlkit.experiments.records import find_record, load_record
    spec = semantic_table(profile)
    src = SEMANTIC["source"]
    sim = class_similarity(src, SEMANTIC["judge"], profile)
    names = dict(zip(*_source_classes(src, profile)[:2]))
    per = {}
    for r in spec.rows:
        found = [find_record(spec.config(r, s, profile), profile) for s in spec.seeds_of(r)]
        per[r.method] = [load_record(p)["result"]["neighbour_classes"] for p in found if p is not None]
    if not per.get(BASELINE):
        return pd.DataFrame(columns=["query", "rank", "class", "similarity", "method", "count"])
    base = per[BASELINE]
    confused = {q: np.mean([sum(v for c, v in run[q].items() if c != q) for run in base]) for q in base[0]}
    chosen = sorted(confused, key=lambda q: (-confused[q], q))[:queries]
    rel = related_classes(base[0], sim, SEMANTIC["related"] - 1)
    lines = []
    for q in chosen:
        for rank, c in enumerate([q, *rel[q]]):
            for m, runs in per.items():
                if runs:
                    lines.append({"query": names[q], "rank": rank, "class": names[c], "similarity": float(sim.at[q, c]),
                                  "method": m, "count": float(np.mean([run[q].get(c, 0) for run in runs]))})
    return pd.DataFrame(lines)


def TABLES(profile: str = "quick") -> dict[str, Table]:  # noqa: N802 - same signature as the other papers
    """The language-guidance tables: Table 1 (the state of the art: quoted, no rows run), Tables 2 / S1, the ablation
    tables, Fig. S1 and, beyond the paper, the controls and the unified setting."""
    return {"Table 2": table("Table 2"), "Table S1": table("Table S1"),
            **{n: ablation_table(n, profile) for n in ABLATIONS}, "Fig. S1": convergence_table(profile),
            "Fig. 3": semantic_table(profile), "Unified setting": unified_table(profile)}


def similarities(source: str, guidances, profile: str = "quick", n: int = 12) -> dict[str, "pd.DataFrame"]:  # noqa: F821
    """What each guidance would distil on ``n`` training classes of a source: the cosine similarity of their stored
    language rows (:func:`class_similarity`), before the loss's shift, indexed by the classes' names. Reads the
    language files (computing one only if it is missing)."""
    rows, texts, _ = _source_classes(source, profile)
    out = {}
    for g in guidances:
        sim = class_similarity(source, g, profile).loc[rows[:n], rows[:n]]
        out[g] = sim.set_axis(texts[:n], axis=0).set_axis(texts[:n], axis=1)
    return out


def table_jobs(profile: str = "quick", seeds=SEEDS) -> list[tuple[str, str, dict]]:
    """Every run of the tables, each once (a run that several tables list, e.g. the baseline, is one job)."""
    jobs, seen = [], set()
    for name, spec in TABLES(profile).items():
        if name in ("Table S1", "Fig. S1", "Fig. 3", "Unified setting"):   # Table 2's runs; job lists of their own
            continue
        folder = "table2" if name == "Table 2" else "ablations"
        for s in seeds:
            for r in spec.rows:
                label = f"{r.label}-seed{s}"
                if label in seen:
                    continue
                seen.add(label)
                jobs.append((folder, label, config_for(r, s, profile)))
    return jobs


def job_list(name: str, profile: str = "quick") -> list[tuple]:
    """A named job list for ``umlkit records train language_guidance NAME``: ``omega_sweep``, ``tables``,
    ``semantic`` (Fig. 3), ``unified_sweep`` or ``unified`` (the unified setting, beyond the paper). A job is (record folder, label, key)
    for the default runner (``train_analysis``), or (folder, label, key, runner)."""
    if name == "omega_sweep":
        return omega_jobs(profile)
    if name == "tables":
        return table_jobs(profile)
    if name == "unified_sweep":
        return unified_sweep_jobs(profile)
    if name == "semantic":
        spec = semantic_table(profile)
        return [("fig3", f"{r.label}-seed{s}", spec.config(r, s, profile)) for s in SEEDS for r in spec.rows]
    if name == "unified":
        spec = unified_table(profile)
        return [("unified", f"{r.label}-seed{s}", spec.config(r, s, profile), r.runner) for s in SEEDS for r in spec.rows]
    raise KeyError(f"unknown language-guidance job list {name!r}; choose omega_sweep, tables, semantic, unified_sweep "
                   f"or unified")


def omega_table(profile: str = "quick", select_on: str = "MAP@R") -> "pd.DataFrame":  # noqa: F821
    """The sweep's stored validation scores, one line per (row, omega), with the chosen omega per row (the best
    validation ``select_on``) and whether it is interior to the grid."""
    import pandas as pd

    from umlkit.experiments.records import find_record, load_record, normalise_key
    lines = []
    for _, label, key in omega_jobs(profile):
        path = find_record(normalise_key(key), profile)
        if path is None:
            continue
        rec = load_record(path)
        cfg = key["config"]
        terms = [t for t in cfg["objective"] if t["name"] == "language_guidance"]
        row = label.rsplit("-w", 1)[0] if terms else label.rsplit("-seed", 1)[0]
        lines.append({"row": row, "omega": terms[0]["weight"] if terms else 0.0,
                      **{m: v["CUB"] for m, v in rec["result"]["test"].items() if m in ("R@1", "MAP@R")}})
    out = pd.DataFrame(lines)
    if out.empty:
        return out
    best = out[out["omega"] > 0].loc[lambda d: d.groupby("row")[select_on].idxmax()]
    out["chosen"] = out.index.isin(best.index)
    out["interior"] = out["row"].map({r["row"]: min(omega_grid(r["row"])) < r["omega"] < max(omega_grid(r["row"]))
                                      for _, r in best.iterrows()})
    return out


# ------------------------------------------------------------------------------------------------ chapter views
def similarity_guidances(profile: str = "quick") -> list[str]:
    """The guidances whose class similarities a profile can show without training (PLG and the controls need the
    quick profile's classifier and UML-Mini's attributes)."""
    return ["ELG", "PLG Top-5", "attribute overlap", "ELG shuffled"] if profile == "quick" else ["ELG"]


def guidance_gains(cmp: "pd.DataFrame", metric: str = "R@1") -> "pd.DataFrame":  # noqa: F821
    """Table 2 as gains: per base method, guidance and dataset, (with guidance) - (without), measured and in the
    paper (long: ``numbers`` = measured / paper)."""
    import pandas as pd
    sub = cmp[cmp["metric"] == metric]
    value = {(r["method"], r["dataset"]): (r["measured"], r["paper"]) for _, r in sub.iterrows()}
    lines = []
    for (method, d), (m, p) in value.items():
        base, g = _split_row(method)
        if g is None or (base, d) not in value:
            continue
        bm, bp = value[(base, d)]
        lines += [{"method": base, "guidance": g, "dataset": d, "numbers": "measured", "gain": m - bm},
                  {"method": base, "guidance": g, "dataset": d, "numbers": "paper", "gain": p - bp}]
    return pd.DataFrame(lines)


def curve_frame(cmp: "pd.DataFrame") -> "pd.DataFrame":  # noqa: F821
    """The compared Fig. S1 table as learning curves: dataset, method, epoch, measured (seed mean), spread."""
    sub = cmp[cmp["metric"].str.startswith("R@1 epoch ")].copy()
    sub["epoch"] = sub["metric"].str.rsplit(" ", n=1).str[1].astype(int)
    return sub[["dataset", "method", "epoch", "measured", "spread", "seeds"]].sort_values(["dataset", "method", "epoch"])


def paper_equivalence_gaps() -> dict[str, float]:
    """The paper's own gaps behind its "about as good" readings: the largest |PLG - ELG| R@1 of Table 2 (completed
    from Table S1) and the range of the language models' R@1 in Table 3 (a) (CUB and Cars)."""
    t2 = paper_table(PAPER, "Table 2").fillna({"section": "", "setting": ""})
    v = {(r["method"], r["dataset"]): r["value"] for _, r in t2[t2["metric"] == "R@1"].iterrows()}
    plg = [abs(v[(f"{m} + PLG Top-5", d)] - v[(f"{m} + ELG", d)]) for m in lg_config()["methods"]
           for d in ("CUB", "Cars", "SOP") if (f"{m} + PLG Top-5", d) in v and (f"{m} + ELG", d) in v]
    t3 = paper_table(PAPER, "Table 3").fillna({"section": ""})
    t3 = t3[(t3["metric"] == "R@1") & (t3["method"] != "Baseline") & t3["section"].isin(["", "(a) Language Models"])]
    lm = t3.groupby("dataset")["value"].agg(lambda x: x.max() - x.min())
    return {"plg_elg": max(plg), "language_models": float(lm.max())}


def detectable_margin(claims, alpha: float = 0.05) -> float:
    """The median, over the equivalence claims with a test, of the smallest margin their TOST could have supported:
    |gap| + t_(1-alpha, df) x se, from each claim's measured gap and the test's standard error and degrees of
    freedom (:func:`umlkit.experiments.tables.check_claims`)."""
    import numpy as np
    from scipy import stats
    if claims.empty:
        return float("nan")
    eq = claims[claims["margin"].notna() & claims["se"].gt(0) & claims["df"].gt(0)]
    out = (eq["measured A"] - eq["measured B"]).abs() + stats.t.ppf(1 - alpha, eq["df"]) * eq["se"]
    return float(np.median(out)) if len(out) else float("nan")


def chapter_facts(cmp: dict, claims, sweep, profile: str = "quick", measured: dict | None = None) -> dict:
    """The numbers the chapter's prose glues, from the compared tables (``{table: compare frame}``), the claims and
    the omega sweep; "–" where a table has no records yet."""
    import numpy as np
    import pandas as pd
    facts: dict[str, str] = {}
    t2 = cmp.get("Table 2", pd.DataFrame())
    seeds = pd.concat([c.loc[c["measured"].notna(), "seeds"] for c in cmp.values() if not c.empty]) \
        if any(not c.empty for c in cmp.values()) else pd.Series(dtype=float)
    facts["seeds_min"] = str(int(seeds.min())) if len(seeds) else "0"
    facts["seeds_max"] = str(int(seeds.max())) if len(seeds) else "0"
    recs = {r for m in (measured or {}).values() if not m.empty for r in m["record"]}
    facts["n_records"] = str(len(recs))
    for g, key in (("ELG", "elg"), ("PLG Top-5", "plg")):
        for s in SOURCES:
            d = SOURCE_NAMES[s]
            for field, prefix in (("measured", ""), ("paper", "paper_")):
                gains = [_value(t2, f"{m} + {g}", d, field=field) - _value(t2, m, d, field=field)
                         for m in lg_config()["methods"]]
                gains = [x for x in gains if np.isfinite(x)]
                facts[f"{prefix}{key}_gain_{s}"] = _num(float(np.mean(gains)), signed=True) if gains else "–"
    is_t2 = claims["claim"].isin([c.text for c in table("Table 2").claims]) if not claims.empty else []
    equiv = claims["margin"].notna() if not claims.empty else []
    if not claims.empty:
        facts["t2_beats"] = str(int((is_t2 & ~equiv).sum()))
        facts["t2_equiv"] = str(int((is_t2 & equiv).sum()))
        facts["t2_beats_verdicts"] = _verdict_counts(claims, is_t2 & ~equiv)
        facts["t2_equiv_verdicts"] = _verdict_counts(claims, is_t2 & equiv)
        t4 = claims["claim"].str.startswith("ELG's row-wise KL beats")
        facts["t4_verdicts"] = _verdict_counts(claims, t4)
        ctl = claims["claim"].isin([c.text for c in ablation_table("Controls", profile).claims])
        facts["ctl_verdicts"] = _verdict_counts(claims, ctl)
    else:
        for k in ("t2_beats", "t2_equiv"):
            facts[k] = "0"
        for k in ("t2_beats_verdicts", "t2_equiv_verdicts", "t4_verdicts", "ctl_verdicts"):
            facts[k] = "not yet checked (no records)"
    r1 = t2[t2["metric"] == "R@1"] if not t2.empty else t2
    facts["max_spread"] = _num(float(r1["spread"].max())) if not r1.empty else "–"
    facts["median_spread"] = _num(float(r1.loc[r1["seeds"] > 1, "spread"].median())) if not r1.empty else "–"
    facts.update(_ablation_facts(cmp, claims))
    facts.update(_convergence_facts(cmp, claims, profile, t2, r1))
    facts.update(_semantic_and_unified_facts(cmp, claims, profile))
    return facts


def _ablation_facts(cmp: dict, claims) -> dict:
    """The controls, Table 4's distillation variants, Table S3's pseudolabel counts and Table 5's captions."""
    import numpy as np
    import pandas as pd
    facts: dict[str, str] = {}
    ctl = cmp.get("Controls", pd.DataFrame())
    for key, row in (("base", BASELINE), ("elg", f"{BASELINE} + ELG"), ("shuffled", "+ ELG, shuffled names"),
                     ("attr", "+ attribute overlap (no language model)"), ("tree", "+ attribute tree (no language model)")):
        vals = [_value(ctl, row, d) for d in ("CUB", "Cars")]   # where the paper sees language help
        facts[f"ctl_{key}"] = _num(float(np.nanmean(vals))) if any(np.isfinite(vals)) else "–"
        facts[f"ctl_{key}_sop"] = _num(_value(ctl, row, "SOP"))
    t4c = cmp.get("Table 4", pd.DataFrame())
    alts = [_value(t4c, r[1], "CUB") for r in ABLATIONS["Table 4"]["rows"][2:]]
    alts = [a for a in alts if np.isfinite(a)]
    facts["t4_range"] = f"{min(alts):.1f} to {max(alts):.1f}" if alts else "–"
    facts["t4_elg"] = _num(_value(t4c, "Baseline + ELG", "CUB"))
    s3 = cmp.get("Table S3", pd.DataFrame())
    for k, row in (("top1", "Baseline + PLG"), ("top5", "Baseline + PLG (Top-5)"), ("top10", "Baseline + PLG (Top-10)"),
                   ("top20", "Baseline + PLG (Top-20)")):
        facts[f"s3_{k}"] = _num(_value(s3, row, "CUB"))
    facts["s3_sample"] = _num(_value(s3, "Sample (Top-5)", "CUB"))
    t5c = cmp.get("Table 5", pd.DataFrame())
    facts["t5_caption"] = _num(_value(t5c, "Caption", "CUB"))
    facts["t5_insertion"] = _num(_value(t5c, "Caption + insertion", "CUB"))
    t5 = claims["claim"].str.contains("caption") if not claims.empty else []
    facts["t5_caption_verdicts"] = (_verdict_counts(claims, t5) if not claims.empty and t5.any()
                                    else "not checked yet (no records)")
    return facts


def _convergence_facts(cmp: dict, claims, profile: str, t2, r1) -> dict:
    """Fig. S1 (the early gap and the cost of guidance) and the paper's own gaps against this run's seed noise."""
    import numpy as np
    import pandas as pd
    facts: dict[str, str] = {}
    conv = cmp.get("Fig. S1", pd.DataFrame())
    first = first_epoch(profile)
    metric = f"R@1 epoch {first}"
    early = [_value(conv, g, d, metric) - _value(conv, BASELINE, d, metric) for g in CURVE_ROWS[1:] for d in ("CUB", "Cars")]
    early = [e for e in early if np.isfinite(e)]
    facts["first_epoch"] = str(first)
    if not conv.empty:
        last = conv[conv["metric"].str.startswith("R@1 epoch ")].assign(
            epoch=lambda d: d["metric"].str.rsplit(" ", n=1).str[1].astype(int)).groupby("dataset")["epoch"].max()
        facts["epochs_cub_cars"] = str(int(last.get("CUB", 0)))
        facts["epochs_sop"] = str(int(last.get("SOP", 0)))
    else:
        facts["epochs_cub_cars"] = facts["epochs_sop"] = "–"
    facts["early_gap"] = _num(float(np.mean(early)), signed=True) if early else "–"
    ratio = [_value(conv, g, SOURCE_NAMES[s], "train seconds") / _value(conv, BASELINE, SOURCE_NAMES[s], "train seconds")
             for g in CURVE_ROWS[1:] for s in SOURCES]
    ratio = [r for r in ratio if np.isfinite(r)]
    facts["time_ratio"] = _num(float(np.mean(ratio)), digits=2) if ratio else "–"
    gaps = paper_equivalence_gaps()
    facts["paper_plg_elg_gap"] = _num(gaps["plg_elg"])
    facts["paper_lm_range"] = _num(gaps["language_models"])
    facts["detectable_margin"] = _num(detectable_margin(claims))
    t2p = [_value(t2, f"{m} + {g}", d, field="paper") - _value(t2, m, d, field="paper")
           for m in lg_config()["methods"] for g in ("ELG", "PLG Top-5") for d in ("CUB", "Cars")]
    t2p = [x for x in t2p if np.isfinite(x)]
    facts["paper_gain_range"] = f"{min(t2p):.1f} to {max(t2p):.1f}" if t2p else "–"
    spread = float(r1.loc[r1["seeds"] > 1, "spread"].median()) if not r1.empty else float("nan")
    facts["gains_below_spread"] = (f"{sum(abs(x) < spread for x in t2p)} of {len(t2p)}" if t2p and np.isfinite(spread)
                                   else "–")
    return facts


def _semantic_and_unified_facts(cmp: dict, claims, profile: str) -> dict:
    """Fig. 3 (which classes the neighbours come from), word order, and the unified setting."""
    import pandas as pd
    facts: dict[str, str] = {}
    sem = cmp.get("Fig. 3", pd.DataFrame())
    sd = SOURCE_NAMES[SEMANTIC["source"]]
    for key, row in (("base", BASELINE), ("elg", f"{BASELINE} + ELG"), ("plg", f"{BASELINE} + PLG Top-5")):
        facts[f"sem_rel_{key}"] = _num(_value(sem, row, sd, "related classes"))
        facts[f"sem_same_{key}"] = _num(_value(sem, row, sd, "same class"))
    facts["sem_k"], facts["sem_related"] = str(SEMANTIC["neighbours"]), str(SEMANTIC["related"])
    if profile == "quick":
        wo = word_order_pairs(SEMANTIC["source"], SEMANTIC["judge"], profile)
        facts["wo_pairs"], facts["wo_min"] = str(wo["pairs"]), _num(wo["min"], digits=3)
        facts["wo_other_max"] = _num(wo["other_max"], digits=3)
    else:
        facts["wo_pairs"] = facts["wo_min"] = facts["wo_other_max"] = "–"
    in_sem = claims["claim"].isin([c.text for c in semantic_table(profile).claims]) if not claims.empty else []
    facts["sem_verdicts"] = (_verdict_counts(claims, in_sem) if not claims.empty and in_sem.any()
                             else "not checked yet (no records)")
    u = lg_config()["unified"]
    facts["unified_grid"] = ", ".join(f"{w:g}" for w in u["omega_grid"])
    facts["unified_val"] = f"{100 * u['val_fraction']:.0f} %"
    facts["val_share"] = f"{100 * float(oodml.methods_config()['val_fraction']):.0f} %"
    facts["unified_classes"] = str(len(_source_classes(UNIFIED, profile)[0])) if profile == "quick" else "–"
    uni = cmp.get("Unified setting", pd.DataFrame())
    for m, key in (("PUMA", "puma"), ("full fine-tuning", "full")):
        for g, gk in (("ELG", "elg"), ("PLG Top-5", "plg")):
            facts[f"uni_{key}_{gk}"] = _num(_value(uni, f"{m} + {g}", "Unified") - _value(uni, m, "Unified"), signed=True)
    in_uni = claims["claim"].str.contains("in the unified setting") if not claims.empty else []
    facts["uni_claims"] = str(len(unified_table(profile).claims))
    facts["uni_verdicts"] = (_verdict_counts(claims, in_uni) if not claims.empty and in_uni.any()
                             else "not checked yet (the guided rows wait for the unified omega sweep)")
    facts["uni_claim_list"] = ("; ".join(f"“{c}”: {v}" for c, v in claims.loc[in_uni, ["claim", "verdict"]].to_numpy())
                                if not claims.empty and in_uni.any() else "none yet")
    return facts


# ------------------------------------------------------------------------------------------------ unified setting
def unified_config(profile: str = "quick", *, method: str = "PUMA", guidance: str | None = None, seed: int = 0,
                   omega: float | None = None, validation: bool = False) -> dict:
    """Beyond the paper: one row of the unified setting - PUMA's configuration of ``method`` ("PUMA" or "full
    fine-tuning", :func:`umlkit.experiments.puma.run_config`) and, with ``guidance``, the language term over the eight
    sources' training classes with weight ``omega`` (default: the chosen one). Without guidance the configuration is
    PUMA's own, so the PUMA chapter's records serve."""
    from umlkit.experiments import puma
    u = lg_config()["unified"]
    if method not in u["methods"]:
        raise KeyError(f"unified method must be one of {list(u['methods'])}, got {method!r}")
    overrides = [f"data.val_fraction={u['val_fraction']}"] if validation else []
    cfg = puma.run_config(profile, method=u["methods"][method], seed=seed, overrides=overrides)
    if guidance is None:
        return cfg
    if guidance not in u["guidance"]:
        raise KeyError(f"unified guidance must be one of {u['guidance']}, got {guidance!r}")
    if omega is None:
        chosen = (u["omega"].get(profile) or {}).get(f"{method} + {guidance}")
        if chosen is None:
            raise KeyError(f"configs/language_guidance/language_guidance.yaml has no unified {profile} omega for "
                           f"{method + ' + ' + guidance!r} (run the unified omega sweep)")
        omega = chosen
    out = copy.deepcopy(cfg)
    out["objective"].append({"name": "language_guidance", "weight": float(omega),
                             "options": {**lg_config()["loss"], **guidance_spec(guidance)["loss"],
                                         "language_embeddings": language_ref(UNIFIED, guidance, profile)}})
    out["name"] = f"language_guidance-unified-{method.replace(' ', '_')}+{guidance.replace(' ', '_')}"
    return out


def unified_rows() -> list[tuple[str, str | None]]:
    u = lg_config()["unified"]
    return [(m, g) for m in u["methods"] for g in (None, *u["guidance"])]


def _unified_label(method: str, guidance: str | None) -> str:
    return method if guidance is None else f"{method} + {guidance}"


def unified_sweep_jobs(profile: str = "quick", seed: int = 0) -> list[tuple[str, str, dict]]:
    """The unified setting's omega sweep: every guided row x ``unified.omega_grid`` on PUMA's validation split,
    and each method without guidance (the reference; PUMA's own learning-rate sweep has the same run)."""
    u = lg_config()["unified"]
    jobs = []
    for m, g in unified_rows():
        name = _unified_label(m, g).replace(" ", "_")
        if g is None:
            jobs.append(("unified_sweep", f"{name}-seed{seed}", unified_config(profile, method=m, seed=seed,
                                                                                 validation=True), "train"))
        else:
            grid = omega_grid(_unified_label(m, g), u)
            jobs += [("unified_sweep", f"{name}-w{w:g}-seed{seed}",
                      unified_config(profile, method=m, guidance=g, seed=seed, omega=w, validation=True),
                      "train") for w in grid]
    return jobs


def unified_sweep(profile: str = "quick") -> "pd.DataFrame":  # noqa: F821
    """The stored unified sweep: validation and test Unified / Harmonic R@1 per (row, omega), the best omega so far
    (best validation Unified R@1) marked, and whether it is interior to the values measured for the row (once it is,
    it is configured in ``unified.omega``)."""
    import pandas as pd

    from umlkit.experiments.records import find_record, load_record, normalise_key
    lines = []
    for _, label, cfg, _ in unified_sweep_jobs(profile):
        path = find_record(normalise_key(cfg), profile)
        if path is None:
            continue
        r = load_record(path)["result"]
        terms = [t for t in cfg["objective"] if t["name"] == "language_guidance"]
        lines.append({"row": label.rsplit("-w", 1)[0].rsplit("-seed", 1)[0].replace("_", " "),
                      "omega": terms[0]["weight"] if terms else 0.0,
                      "val Unified": r["val"]["Unified"], "val Harmonic": r["val"]["Harmonic"],
                      "test Unified": r["test"]["Unified"]})
    out = pd.DataFrame(lines)
    if out.empty:
        return out
    best = out[out["omega"] > 0].loc[lambda d: d.groupby("row")["val Unified"].idxmax()]
    out["chosen"] = out.index.isin(best.index)
    tried = out[out["omega"] > 0].groupby("row")["omega"].agg(["min", "max"])   # the values measured so far
    out["interior"] = out["row"].map({r["row"]: tried.loc[r["row"], "min"] < r["omega"] < tried.loc[r["row"], "max"]
                                      for _, r in best.iterrows()})
    return out


def unified_table(profile: str = "quick") -> Table:
    """Beyond the paper: PUMA and unified full fine-tuning with and without ELG / PLG over the eight sources
    (per-source R@1, Unified and Harmonic), with the claims that guidance raises Unified and Harmonic R@1. A guided
    row is part of the table once the unified sweep's omega for it is configured."""
    from umlkit.experiments.puma import PUMA_ORDER
    chosen = lg_config()["unified"]["omega"].get(profile) or {}
    rows = [Row(method=_unified_label(m, g), spec={"method": m, "guidance": g}, runner="train", group=m,
                label=f"unified-{_unified_label(m, g).replace(' + ', '+').replace(' ', '_')}")
            for m, g in unified_rows() if g is None or f"{m} + {g}" in chosen]   # a guided row joins once its
                                                                                 # omega is chosen

    def config(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
        return unified_config(profile, method=row.spec["method"], guidance=row.spec["guidance"], seed=seed)
    claims = [Claim(f"{m} + {g} beats {m} in the unified setting ({d})",
                    {"section": "", "method": f"{m} + {g}", "setting": "", "dataset": d},
                    {"section": "", "method": m, "setting": "", "dataset": d})
              for m, g in unified_rows() if g is not None for d in ("Unified", "Harmonic")]
    return Table(PAPER, "Unified setting", rows, config, seeds=SEEDS, claims=claims, params=False,
                 columns=[SOURCE_NAMES[s] for s in PUMA_ORDER] + ["Unified", "Harmonic"])


# ------------------------------------------------------------------------------------------------ registry entry
# what the scoreboard, `umlkit records` and `umlkit reproduce --paper` need (registered by umlkit.experiments.catalog)
ENTRY = Paper(name=PAPER, title="Language guidance (Roth, Vinyals, Akata, CVPR 2022)", claim_tables=TABLES,
              chapters=("language_guidance",), headline="Multisimilarity + ELG beats Multisimilarity (CUB)",
              job_lists={n: partial(job_list, n)
                         for n in ("omega_sweep", "tables", "semantic", "unified_sweep", "unified")})
