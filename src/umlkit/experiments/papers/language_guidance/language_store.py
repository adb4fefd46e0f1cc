"""The language file store: per source, the text embeddings a language-guided run is trained against.

Language guidance (Roth, Vinyals, Akata, CVPR 2022) aligns the image embedding's similarities with those of a
language model's embeddings of class-level text: ELG embeds each class's cleaned name (the loaders'
``language_names``, as the official ``language_conversion``); PLG embeds the top-k pseudolabels of an ImageNet-style
classifier averaged over each class's images (official ``relabel``). Quick: the sentence model all-MiniLM-L6-v2
and the tiny ViT v2's named 320-way pretraining classifier; full: CLIP ViT-B/32's text encoder and torchvision's
ImageNet ResNet-50 (timm ``resnet50.tv_in1k``, the official ``pretrainedmodels`` weights) with the ImageNet class
names. What a guidance name means is ``configs/language_guidance/language_guidance.yaml``.

A file is written once under ``results/<profile>/language/`` and found again through ``index.json`` by its
*identity*: a hash of its inputs (the data fingerprint, guidance, model, primer, shuffle seed, classifier weights)
and ``umlkit.data.language.FILE_VERSION``, never of code bytes. Inside ``records.read_only()`` a missing file is
reported (``MissingSideFile``), never computed. The classes a file covers are those of a run's data: the
single-source recipe's default split (:mod:`umlkit.experiments.recipes.source`) or, for the unified setting, the
training classes of the unified recipe's eight sources (:mod:`umlkit.experiments.recipes.unified`).
"""
from __future__ import annotations

from pathlib import Path

from umlkit._shipped import DamagedShippedFile
from umlkit.experiments.recipes import source as source_recipe
from umlkit.experiments.recipes import unified as unified_recipe
from umlkit.experiments.recipes.paper_configs import read_yaml
from umlkit.experiments.runs.records import MissingSideFile, is_read_only


def lg_config() -> dict:
    """``configs/language_guidance/language_guidance.yaml``, parsed once per process."""
    return read_yaml("language_guidance", "language_guidance.yaml", numbers=True)


# what a guidance's language rows come from: per class (class names, pseudolabels averaged over a class's images,
# UML-Mini's attributes or attribute tree) or per image (captions, captions with the class name inserted, each
# image's own pseudolabels), the per-image kinds with the loss option per_sample
NAME_KINDS = ("class", "pseudolabels", "attributes", "hierarchy", "captions", "captions+insertion",
              "sample pseudolabels", "wordnet", "wordnet hierarchy", "pseudolabels wordnet",
              "pseudolabels wordnet hierarchy")
PER_IMAGE = ("captions", "captions+insertion", "sample pseudolabels")
# the word-hierarchy kinds (Table 3 (c), Table S3): whose names (the classes' or their pseudolabels') and which
# WordNet similarity (wordnet_names.KINDS: Wu-Palmer, or the hierarchy height similarity of HierMatch)
WORDNET_KINDS = {"wordnet": ("class", "wup"), "wordnet hierarchy": ("class", "hierarchy"),
                 "pseudolabels wordnet": ("pseudolabels", "wup"),
                 "pseudolabels wordnet hierarchy": ("pseudolabels", "hierarchy")}
_CLASSIFIED = ("pseudolabels", "sample pseudolabels", "pseudolabels wordnet", "pseudolabels wordnet hierarchy")


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
        return unified_recipe.run_config(profile)
    return source_recipe.run_config(profile, source=source, rate_from="cub")   # only its data matter here


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


def source_classes(source: str, profile: str):
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

    from umlkit.models.backbones import hub_source, hub_unreachable, in_hf_cache
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
    if cfg is not None and not in_hf_cache(cfg):
        reason = hub_unreachable()
        if reason is not None:
            raise ConnectionError(f"PLG's classifier {model} is not in the Hugging Face cache and the hub is "
                                  f"unreachable ({reason}); download {hub_source(cfg)} and set plg_classifier.weights "
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
    from umlkit.experiments.runs.fingerprint import data_fingerprint
    from umlkit.results import file_sha256 as sha
    spec = guidance_spec(guidance)
    g = {"names": spec["names"], "k": spec["k"]}
    parts = {"source": source, "data": data_fingerprint(_base_config(source, profile)), "guidance": g,
             "model": model, "template": template, "shuffle": shuffle_seed, "version": language.FILE_VERSION}
    if g["names"] in ("attributes", "hierarchy", *WORDNET_KINDS):   # no language model reads anything
        parts.update(model=None, template=None)
    if g["names"] in WORDNET_KINDS:   # the database's version, not its bytes: reading needs no WordNet installed
        from umlkit.experiments.papers.language_guidance import wordnet_names
        parts["wordnet"] = wordnet_names.WORDNET_VERSION
    if g["names"] in _CLASSIFIED and profile == "quick":
        from umlkit.models.pretrain import weight_files
        parts["classifier"] = {k: sha(weight_files("v2")[k]) for k in ("weights", "heads")}
    elif g["names"] in _CLASSIFIED:
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
    the record key. Inside :func:`umlkit.experiments.runs.records.read_only` a file that is not stored raises
    :class:`~umlkit.experiments.runs.records.MissingSideFile` (its rows count as missing records) and nothing is
    written."""
    import json

    from umlkit._paths import results_root
    from umlkit.results import atomic_write, file_lock
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
        try:
            ref = _lookup(folder, index, ident, profile)
        except DamagedShippedFile as err:   # named where the rows that read it are listed; nothing is rewritten
            raise MissingSideFile(f"the language file for {source} / {guidance} is unusable: {err}") from None
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
                atomic_write(index_path, json.dumps(dict(sorted(index.items())), indent=1))
    _REFS[memo] = ref
    return dict(ref)


def _lookup(folder: Path, index: dict, ident: str, profile: str) -> dict | None:
    """The stored file of ``ident`` (None where there is none), checked against its folder's ``SHA256SUMS``
    (:mod:`umlkit._shipped`: a damaged file raises, naming itself, instead of being used or made again)."""
    from umlkit._shipped import check_sha
    from umlkit.results import file_sha256
    if ident in index and (folder / index[ident]).is_file():
        path = folder / index[ident]
        sha = check_sha(path, file_sha256(path), f"`git checkout -- {_key_path(path, profile)}` where it is "
                                                 f"committed; else delete it and `umlkit records train "
                                                 f"language_guidance ...` writes it again")
        return {"file": _key_path(path, profile), "sha256": sha}
    return None


def _make(source, guidance, profile, model, template, shuffle_seed, g) -> dict:
    from umlkit.data.language import language_file
    if g["names"] in ("attributes", "hierarchy"):
        return _attribute_file(source, profile, g["names"], shuffle_seed)
    if g["names"] in WORDNET_KINDS:
        return _wordnet_file(source, profile, g["names"], int(g["k"]))
    if g["names"] in PER_IMAGE:
        from umlkit.data.language import sample_language_file
        keys, texts = _image_texts(source, profile, g["names"], int(g["k"]))
        made = sample_language_file(keys, texts, model, template, profile=profile, tag=source)
        return {"file": _key_path(made["file"], profile), "sha256": made["sha256"]}
    if g["names"] == "class":
        rows, texts, _ = source_classes(source, profile)
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
    rows, _, _ = source_classes(source, profile)
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


def _wordnet_file(source: str, profile: str, kind: str, k: int) -> dict:
    """The word-hierarchy rows' class file (:data:`WORDNET_KINDS`): unit vectors whose cosines are the WordNet
    similarity of the classes' names (one row per class) or of their top-``k`` pseudolabels (k slots per class,
    each pseudolabel's vector; the loss averages the slots' cosines), from
    :func:`~umlkit.experiments.papers.language_guidance.wordnet_names.similarity_matrix`."""
    import hashlib

    import numpy as np

    from umlkit._paths import results_root
    from umlkit.data import language
    from umlkit.experiments.papers.language_guidance import wordnet_names
    what, sim = WORDNET_KINDS[kind]
    if what == "class":
        rows, names, _ = source_classes(source, profile)
        emb, _ = wordnet_names.unit_embeddings(wordnet_names.similarity_matrix(names, sim))
    else:
        rows, slots = _pseudolabel_texts(source, profile, k)
        vocab = sorted({t for ts in slots for t in ts})
        vectors, _ = wordnet_names.unit_embeddings(wordnet_names.similarity_matrix(vocab, sim))
        at = {t: i for i, t in enumerate(vocab)}
        emb = np.stack([vectors[[at[t] for t in ts]] for ts in slots])
    emb = np.round(emb, 5)
    digest = hashlib.sha256(np.ascontiguousarray(emb).tobytes() + "\n".join(rows).encode()).hexdigest()
    path = results_root(profile) / "language" / f"{source}-{kind.replace(' ', '-')}-{digest[:12]}.npz"
    made = language.embeddings_file(rows, emb, path)
    return {"file": _key_path(made["file"], profile), "sha256": made["sha256"]}


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
