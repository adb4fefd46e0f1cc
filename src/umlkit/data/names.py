"""English class names and image captions for UML-Mini, and class-name cleaning as the language-guidance code does.

Language guidance (Roth et al., "Integrating language guidance into vision-based deep metric learning", CVPR 2022)
embeds each training class's *name* with a language model ("a photo of a {}"); its official code takes the name
from the dataset's folder names (``datasets/*.py: language_conversion``): CUB the folder after the ``NNN.`` prefix
with ``_`` as spaces ("Black footed Albatross"), Cars the folder name, SOP the super-category (folder minus
``_final``). :func:`clean_class_name` applies those rules (and the analogous ones for Dogs' ``nXXXXXXXX-Breed``
folders, NABirds, Aircraft variants, Flowers' names file and In-shop categories).

For UML-Mini the names are built from the attributes that *define* a class in its source (:data:`umlkit.data.mini.
SOURCES`), so a language model has something to say about them: "amber bird with an azure head", "wide checkered
star", "coarse vertically striped cross". Captions describe one image and also name its nuisance attributes
(colour where colour is a nuisance, size, aspect, background), which is what a caption-vs-class-name comparison
needs. Everything is a pure function of the attribute dicts the generator already draws: naming consumes no random
numbers, so the images stay byte-identical.

Written by hand: a vocabulary of a few dozen words for a synthetic world; no library describes it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["SHAPES", "HUES16", "hue_name", "colour_phrase", "background_phrase", "class_name", "caption",
           "insert_class_name", "clean_class_name",
           "flowers102_names", "dedupe"]

# 16 hue names at 22.5 degree steps of the HSV circle (0 = red). With 16 bins the cell diagonal (0.088 of the hue
# circle) is below the 0.09 minimum distance of the bird-like classes, so two such classes never share a name.
HUES16 = ("red", "vermilion", "amber", "yellow", "chartreuse", "lime", "green", "jade", "cyan", "azure", "cobalt",
          "blue", "violet", "purple", "magenta", "rose")
# the object nouns of UML-Mini's captions (the shapes it draws; umlkit.data.mini renders them)
SHAPES = ("disc", "square", "triangle", "cross", "ring", "diamond", "star", "crescent")
ASPECT_WORDS = {0.75: "tall", 1.0: "", 1.33: "wide"}
SCALE_WORDS = {7.0: "small", 10.0: "large"}
PERIOD_WORDS = {4: "fine", 6: "coarse"}
DISC_WORDS = {"none": "", "N": "a dot on top", "E": "a dot on the right", "S": "a dot at the bottom",
              "W": "a dot on the left", "C": "a dot in the centre"}
# upper bounds
SAT_WORDS = ((0.46, "greyish"), (0.57, "pale"), (0.68, "muted"), (0.79, "soft"), (0.9, "bright"), (9.0, "vivid"))


def hue_name(h: float) -> str:
    return HUES16[int(round((float(h) % 1.0) * 16)) % 16]


def colour_phrase(h: float, s: float, v: float) -> str:
    """A colour as a person would name it: greys for low saturation, else the hue with light/dark/pale words."""
    s, v = float(s), float(v)
    if s < 0.25:
        return "white" if v > 0.88 else "light grey" if v > 0.65 else "grey" if v > 0.4 else "dark grey"
    prefix = "dark " if v < 0.5 else "pale " if s < 0.5 else ""
    return prefix + hue_name(h)


def background_phrase(a: dict) -> str:
    h, s, v = a["bg_top"]
    v = (v + a["bg_bottom"][2]) / 2
    return colour_phrase(h, s, v)


def _words(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def _article(phrase: str) -> str:
    return ("an " if phrase[:1] in "aeiou" else "a ") + phrase


def class_name(source: str, cls: dict) -> str:
    """The English name of a class from its class-defining attributes (``cls`` as drawn by the generator)."""
    if source in ("cub", "nabirds"):
        return f"{hue_name(cls['hue'])} bird with {_article(hue_name(cls['disc_hue']))} head"
    if source == "flowers":
        sat = next(w for bound, w in SAT_WORDS if cls["sat"] < bound)
        return f"{sat} {hue_name(cls['hue'])} flower"
    # the larger variant adds scale (Cars-, SOP-like) or aspect (Dogs-like) to a class's definition
    scale = SCALE_WORDS[float(cls["scale"])] if "scale" in cls else ""
    if source == "cars":
        return _words(scale, ASPECT_WORDS[float(cls["aspect"])], cls["texture"], cls["shape"])
    if source == "aircraft":
        light = {"N": " with a nose light", "S": " with a tail light"}.get(cls["disc_pos"], "")
        return _words(scale, ASPECT_WORDS[float(cls["aspect"])], cls["shape"]) + light
    if source == "dogs":
        aspect = ASPECT_WORDS[float(cls["aspect"])] if "aspect" in cls else ""
        return _words(aspect, PERIOD_WORDS[int(cls["period"])], cls["texture"], cls["shape"])
    if source == "sop":
        disc = f" with a grey {DISC_WORDS[cls['disc_pos']][2:]}" if cls["disc_pos"] != "none" else ""
        return _words(scale, ASPECT_WORDS[float(cls["aspect"])], cls["texture"], cls["shape"]) + disc
    if source == "inshop":
        disc = f" with a dark {DISC_WORDS[cls['disc_pos']][2:]}" if cls["disc_pos"] != "none" else ""
        return _words(ASPECT_WORDS[float(cls["aspect"])], PERIOD_WORDS[int(cls["period"])], cls["texture"],
                      cls["shape"]) + disc
    raise ValueError(f"no naming rule for UML-Mini source {source!r}")


TEXTURE_PHRASES = {"horizontally striped": "horizontal stripes", "vertically striped": "vertical stripes",
                   "checkered": "checks", "diagonally striped": "diagonal stripes"}


def caption(source: str, a: dict) -> str:
    """One image described in full, class-defining and nuisance attributes alike: "a small wide chartreuse
    triangle with fine horizontal stripes and a cobalt dot on top, on a grey background". Colours are named from
    the image's own (jittered) hue, saturation and value, so near a hue-bin edge a caption can use the neighbouring
    colour word of its class name, as a person describing the photo might."""
    obj = _words(SCALE_WORDS[float(a["scale"])], ASPECT_WORDS[float(a["aspect"])],
                 colour_phrase(a["hue"], a["sat"], a["val"]), a["shape"])
    extras = []
    if a["texture"] != "plain":
        extras.append(f"{PERIOD_WORDS[int(a['period'])]} {TEXTURE_PHRASES[a['texture']]}")
    if a.get("disc_pos", "none") != "none":
        extras.append(_article(f"{colour_phrase(a['disc_hue'], a['disc_sat'], a['disc_val'])} "
                               f"{DISC_WORDS[a['disc_pos']][2:]}"))
    text = _article(obj)
    if extras:
        text += " with " + " and ".join(extras)
    return f"{text}, on {_article(background_phrase(a))} background"


def insert_class_name(caption_text: str, name: str) -> str:
    """"Caption + insertion" (the language-guidance paper's Table 5): the caption with its object noun (UML-Mini's
    shape word, the analogue of "bird" in "a blue bird sitting on a branch") replaced by the class name."""
    pattern = re.compile(r"\b(" + "|".join(SHAPES) + r")\b")
    if not pattern.search(caption_text):
        raise ValueError(f"caption {caption_text!r} names no shape ({', '.join(SHAPES)}) to replace")
    return pattern.sub(name, caption_text, count=1)


def dedupe(names: list[str]) -> list[str]:
    """Names made unique within a source: a repeated name gets " II", " III", ... in order of appearance (needed
    only when a larger variant packs continuous attributes closer than the vocabulary resolves)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0) + 1
        seen[n] = k
        out.append(n if k == 1 else f"{n} {_roman(k)}")
    return out


def _roman(k: int) -> str:
    out = ""
    for value, sym in ((10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while k >= value:
            out, k = out + sym, k - value
    return out


def flowers102_names() -> list[str]:
    """The 102 Oxford Flowers category names in label order, as commonly distributed with the dataset
    (``cat_to_name.json``; the dataset itself ships no names). Shipped with umlkit."""
    data = json.loads((Path(__file__).with_name("flowers102_cat_to_name.json")).read_text())
    return [data[str(i)] for i in range(1, 103)]


_CODE = re.compile(r"^[A-Z]{1,3}\d{2,4}\s+")


def clean_class_name(dataset: str, raw: str) -> str:
    """A class name as the language-guidance code feeds it to the language model (see the module docstring)."""
    raw = str(raw)
    if dataset == "cub":
        return raw.split(".", 1)[-1].replace("_", " ").strip()
    if dataset == "dogs":
        return raw.split("-", 1)[-1].replace("_", " ").strip() if re.match(r"^n\d{8}-", raw) else raw.replace("_", " ")
    if dataset == "sop":
        return raw.replace("_final", "").replace("_", " ").strip()
    if dataset == "aircraft":
        return _CODE.sub("", raw).strip()
    if dataset == "inshop":
        return raw.replace("_", " ").strip()
    return raw.replace("_", " ").strip()
