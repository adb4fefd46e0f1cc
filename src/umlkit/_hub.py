"""One seconds-long check whether the Hugging Face hub can be reached, shared by every layer that may download
(the backbones' weights in :mod:`umlkit.models.backbones`, the language models in :mod:`umlkit.data.language`): it
lives at the package root so that ``data`` does not import ``models``. Offline is this project's normal case, so a
loader asks this before letting a library retry a download for minutes. Written by hand: huggingface_hub has no
reachability probe with a short timeout (its own requests retry)."""
from __future__ import annotations

import os
import urllib.error
import urllib.request

__all__ = ["hub_unreachable"]


def hub_unreachable(timeout: float | None = None) -> str | None:
    """None when the Hugging Face hub (``HF_ENDPOINT``) answers one HTTP request within ``timeout`` seconds
    (``UMLKIT_HUB_TIMEOUT``, default 5), else the reason (no network, refused, no answer in time, offline mode)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return "HF_HUB_OFFLINE is set"
    if timeout is None:
        raw = os.environ.get("UMLKIT_HUB_TIMEOUT") or "5"
        try:
            timeout = float(raw)
        except ValueError:
            timeout = float("nan")
        if not 0 < timeout <= 600:   # also NaN; a longer wait is what this probe exists to avoid
            raise ValueError(f"UMLKIT_HUB_TIMEOUT={raw!r}: expected seconds in (0, 600], e.g. 5")
    timeout = float(timeout)
    url = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/") + "/api/models/timm"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # an answer, even an error status, means the hub can be reached
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        return f"no answer from {url} within {timeout:g} s" if "timed out" in str(reason) else f"{url}: {reason}"
