"""WordNet similarities of class names for language guidance's word-hierarchy rows (Roth, Vinyals, Akata, CVPR 2022:
Table 3 (c) "+ WordNet" and "+ HierMatch", Table S3 "PLG+WordNet (Top-5)" and "pseudo-HierMatch").

The paper distils "from Wu-Palmer similarities between class names on WordNet" or follows Hierarchical Matching
(Barz and Denzler, WACV 2019): class embeddings whose dot products are the hierarchy's similarity
1 - height(lcs(u, v)) / height(root), on the tree the dataset's classes induce, matched to the image embeddings.

WordNet 3.0 is read offline from a local folder of the Princeton database files (Debian's ``wordnet-base``
installs them under ``/usr/share/wordnet``; ``UMLKIT_WORDNET`` names another) by ``nltk``'s
``WordNetCorpusReader``; without them :class:`WordNetMissing` says which package to install.

A name becomes synsets through its words: the head noun (the last word, or the last before "with") in its first,
most frequent noun sense, and every other word that has a colour sense as that colour (UML-Mini's names are
"<colour> bird with a <colour> head" and "<size> <pattern> <shape>": their nouns are few, their colours many).
Two names' similarity is the symmetric best-match mean of their synsets' similarities; :func:`unit_embeddings`
turns a similarity matrix into unit vectors whose cosines reproduce it (the eigenvectors of its positive part), and
:func:`coverage` reports what the mapping found (shares of names with a head-noun synset, distinct synsets, the
depth of the lowest common hypernyms, the embedding's largest error). Written by hand: nltk gives synsets and
Wu-Palmer, not name mapping or hierarchy embeddings.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import numpy as np

__all__ = ["WordNetMissing", "wordnet", "available", "WORDNET_VERSION", "name_synsets", "similarity_matrix",
           "unit_embeddings", "coverage", "WORDNET_PACKAGE", "KINDS"]

WORDNET_PACKAGE = "wordnet-base"
WORDNET_VERSION = "3.0"   # the only version read (checked on load): part of a language file's identity
DEFAULT_DIR = Path("/usr/share/wordnet")
KINDS = ("wup", "hierarchy")   # Wu-Palmer (+ WordNet), Barz-Denzler height similarity (+ HierMatch)
_FILES = ("data.noun", "index.noun")


class WordNetMissing(RuntimeError):
    """The WordNet database files or nltk are not installed."""


def wordnet_dir() -> Path:
    return Path(os.environ.get("UMLKIT_WORDNET") or DEFAULT_DIR)


# WordNet 3.0's lexicographer files in the order of its ``lexnames`` file, which nltk's reader needs and Debian's
# wordnet-base does not ship (the reader then reads a view of the database with this file added)
_LEXNAMES = ("adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
             "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
             "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
             "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
             "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
             "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather "
             "adj.ppl").split()
_POS_NUMBER = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}


def _view(folder: Path) -> Path:
    """``folder`` itself when it has ``lexnames``, else a copy beside a written ``lexnames`` in the user's cache
    (``$UMLKIT_CACHE`` or ``~/.cache/umlkit``; built in a temporary folder and renamed into place, so two processes
    never see half of one; never inside the database folder or the repository). Copies, ~30 MB once: nltk refuses
    symbolic links that leave its root and hard links."""
    import hashlib
    import shutil
    import tempfile
    if (folder / "lexnames").is_file():
        return folder
    files = sorted(f for f in folder.iterdir() if f.is_file())
    stamp = hashlib.sha256(repr([(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]).encode())
    cache = Path(os.environ.get("UMLKIT_CACHE") or Path.home() / ".cache" / "umlkit")
    view = cache / f"wordnet-{stamp.hexdigest()[:12]}"
    if (view / "lexnames").is_file():
        return view
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".wordnet-{os.getpid()}-", dir=cache))
    for f in files:
        shutil.copy2(f, tmp / f.name)
    (tmp / "lexnames").write_text("".join(f"{i:02d}\t{n}\t{_POS_NUMBER[n.split('.')[0]]}\n"
                                          for i, n in enumerate(_LEXNAMES)))
    try:
        tmp.rename(view)
    except OSError:   # another process renamed its copy first
        shutil.rmtree(tmp, ignore_errors=True)
    return view


@functools.lru_cache(maxsize=2)
def _reader(folder: str):
    try:
        import nltk.data
        from nltk.corpus.reader.wordnet import WordNetCorpusReader
    except ImportError as err:
        raise WordNetMissing(f"the WordNet rows need the Python package nltk (pip install nltk): {err}") from err
    missing = [f for f in _FILES if not (Path(folder) / f).is_file()]
    if missing:
        raise WordNetMissing(f"no WordNet 3.0 database in {folder} (missing {', '.join(missing)}): install the "
                             f"{WORDNET_PACKAGE!r} package (apt-get install {WORDNET_PACKAGE}) or set "
                             "UMLKIT_WORDNET to a folder holding data.noun and index.noun")
    class _LocalWordNet(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):   # no mapping to another WordNet: the local one is 3.0 itself
            return None

    view = str(_view(Path(folder)))
    if view not in nltk.data.path:   # nltk reads only from its data paths
        nltk.data.path.append(view)
    import warnings
    with warnings.catch_warnings():   # "multilingual functions are not available": only English is read
        warnings.simplefilter("ignore", UserWarning)
        reader = _LocalWordNet(view, None)
    if reader.get_version() != WORDNET_VERSION:
        raise WordNetMissing(f"{folder} holds WordNet {reader.get_version()}, the rows are defined on WordNet "
                             f"{WORDNET_VERSION} (the {WORDNET_PACKAGE!r} package)")
    return reader


def wordnet():
    """nltk's reader of the local WordNet database (:class:`WordNetMissing` when there is none)."""
    return _reader(str(wordnet_dir()))


def available() -> bool:
    try:
        wordnet()
    except WordNetMissing:
        return False
    return True


def _colour_sense(wn, word: str):
    colour = wn.synset("color.n.01")
    for s in wn.synsets(word, pos="n"):
        if colour in s.closure(lambda x: x.hypernyms()):
            return s
    return None


def _parts(name: str, wn) -> tuple:
    """(head noun synset or None, [colour synsets]) of a class name."""
    words = [w for w in re.split(r"[^a-z]+", name.lower()) if w]
    head_at = (words.index("with") - 1) if "with" in words else len(words) - 1
    head, colours = None, []
    for i, w in enumerate(words):
        if i == head_at:
            senses = wn.synsets(w, pos="n")
            head = senses[0] if senses else None
        elif (c := _colour_sense(wn, w)) is not None:
            colours.append(c)
    return head, colours


def name_synsets(name: str, wn=None) -> list:
    """The synsets of a class name: its head noun's first sense (first, when WordNet has it) and the colour sense
    of its colour words; empty when the head noun is unknown and no word is a colour."""
    wn = wn or wordnet()
    head, colours = _parts(name, wn)
    return ([head] if head is not None else []) + colours


def _heights(synsets: list) -> dict:
    """Height of every node of the tree the synsets' hypernym paths induce: its longest distance down to one of
    them (each synset is a leaf of its own class, height 0)."""
    heights: dict = {}
    for s in synsets:
        for path in s.hypernym_paths():
            for depth, node in enumerate(path):
                heights[node] = max(heights.get(node, 0), len(path) - 1 - depth)
    return heights


def _pair_similarity(kind: str, heights: dict, top: int):
    def sim(a, b) -> float:
        if a == b:
            return 1.0
        if kind == "wup":
            return float(a.wup_similarity(b) or 0.0)
        lcs = a.lowest_common_hypernyms(b)
        return 1.0 - max(heights.get(x, top) for x in lcs) / top if lcs else 0.0
    return sim


def similarity_matrix(names: list[str], kind: str = "wup", wn=None) -> np.ndarray:
    """(n, n) similarity of the names (:func:`name_synsets`): the symmetric best-match mean of ``kind``
    (:data:`KINDS`) over their synsets; a name without synsets is similar only to itself."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    wn = wn or wordnet()
    sets = [name_synsets(n, wn) for n in names]
    heights = _heights([s for ss in sets for s in ss])
    sim = _pair_similarity(kind, heights, max(heights.values(), default=1) or 1)
    cache: dict = {}

    def best(a: list, b: list) -> float:
        return float(np.mean([max(cache.setdefault((x, y), sim(x, y)) for y in b) for x in a]))

    n = len(names)
    out = np.eye(n)
    for i in range(n):
        for j in range(i + 1, n):
            if sets[i] and sets[j]:
                out[i, j] = out[j, i] = 0.5 * (best(sets[i], sets[j]) + best(sets[j], sets[i]))
            elif names[i] == names[j]:
                out[i, j] = out[j, i] = 1.0
    return out


def unit_embeddings(similarity: np.ndarray) -> tuple[np.ndarray, float]:
    """Unit vectors whose cosines approximate ``similarity`` (eigenvectors of its positive part, scaled by the
    square roots of the eigenvalues, rows normalised) and the largest absolute error of the approximation."""
    s = 0.5 * (similarity + similarity.T)
    vals, vecs = np.linalg.eigh(s)
    keep = vals > 1e-9 * max(vals.max(), 1.0)
    emb = vecs[:, keep] * np.sqrt(vals[keep])
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    return emb, float(np.abs(emb @ emb.T - s).max())


def coverage(names: list[str], wn=None) -> dict:
    """What the name mapping found: the share of names whose head noun is in WordNet, the share with any synset,
    the number of distinct head nouns and of distinct synset sets (order ignored, as the similarity ignores it),
    and the mean depth (from the root) of the lowest common hypernyms of the distinct head nouns."""
    wn = wn or wordnet()
    parts = [_parts(n, wn) for n in names]
    heads = sorted({h for h, _ in parts if h is not None}, key=str)
    depths = [a.lowest_common_hypernyms(b)[0].min_depth() for i, a in enumerate(heads) for b in heads[i + 1:]
              if a.lowest_common_hypernyms(b)]
    return {"names": len(names),
            "with_head": float(np.mean([h is not None for h, _ in parts])) if parts else 0.0,
            "with_synset": float(np.mean([h is not None or bool(c) for h, c in parts])) if parts else 0.0,
            "head_nouns": len(heads), "distinct": len({(h, frozenset(c)) for h, c in parts}),
            "lcs_depth": float(np.mean(depths)) if depths else float("nan")}
