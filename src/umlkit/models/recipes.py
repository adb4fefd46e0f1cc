"""The pretraining recipes of the shipped tiny ViTs (:mod:`umlkit.models.pretrain` trains them) and where each
recipe's weights, heads and report live. Apart from :mod:`umlkit.models.pretrain` so that the backbone factory can name
the recipe that writes a missing weights file without importing the trainer (which imports the factory)."""
from __future__ import annotations

from pathlib import Path

__all__ = ["RECIPES", "TINY_ARCH", "WEIGHTS_DIR", "weight_files"]

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"

# Recipes: v1 is the shipped weights of UML-Mini v1 (study round 2); v2 trains 6x as many steps on 3x as many
# images and masks the targets an image cannot show (the stripe period of a plain body, the colour of an absent
# disc). Round 3 of the study measured that v1 simply stopped too early (texture 23 % at 12 epochs, 95 % at 36).
# The regime map's second edition (configs/regime/edition2.yaml) pretrains on other worlds
# (umlkit.data.mini.PRETRAIN_WORLDS) with v2's recipe: narrow and broad at the tiny width, wide = broad at twice it.
_V2 = dict(epochs=24, n_images=57600, mask_unobservable=True)
RECIPES = {
    "v1": dict(epochs=12, n_images=19200, mask_unobservable=False, tag="uml_mini"),
    "v2": dict(_V2, tag="uml_mini_v2"),
    "narrow": dict(_V2, tag="uml_mini_narrow", world="narrow"),
    "broad": dict(_V2, tag="uml_mini_broad", world="broad"),
    "wide": dict(_V2, tag="uml_mini_broad", world="broad", backbone="vit_wide_uml_patch8_32"),
}
TINY_ARCH = "vit_tiny_uml_patch8_32"


def weight_files(recipe: str = "v1", out: str | Path | None = None) -> dict[str, Path]:
    """Where a recipe's weights, heads and report are written (``out`` defaults to the shipped folder)."""
    folder = Path(out) if out is not None else WEIGHTS_DIR
    arch = RECIPES[recipe].get("backbone", TINY_ARCH)
    stem = arch if recipe == "v1" else f"{arch}.{RECIPES[recipe]['tag']}"
    report = "pretrain_report.json" if recipe == "v1" else f"pretrain_report_{recipe}.json"
    return {"weights": folder / f"{stem}.safetensors", "heads": folder / f"{stem}.heads.safetensors",
            "report": folder / report, "sums": folder / "SHA256SUMS"}
