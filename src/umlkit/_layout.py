"""What only a browser can measure on the built book (issue 59, item 7): a table wider than the box it sits in (a
scroll bar over the last column) at the width readers use, 1400 px. ``check-html``'s other checks read the HTML;
this one lays each page out in headless Chromium: a copy of the page gets a script that measures every output
table against its container and writes the result into the page, and ``chromium --dump-dom`` returns it.

Without a Chromium on the machine the check says so and finds nothing (``make book`` still runs its other checks);
Debian's ``chromium`` package provides one.

Why by hand: Playwright or Selenium would drive a browser too, but need a driver download; one ``--dump-dom`` per
page needs nothing beyond the browser.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["chromium", "wide_tables", "WINDOW"]

WINDOW = (1400, 1600)
_MARK = "umlkit-layout"
# every output table: its own width against the width of the box it sits in (the cell output or the article)
_SCRIPT = f"""<script>
window.addEventListener('load', () => {{
  const out = [];
  document.querySelectorAll('article table').forEach((t, i) => {{
    const box = t.closest('.cell_output, .output, article');
    const over = t.scrollWidth - box.clientWidth;
    if (over > 1) out.push({{index: i, over: over, head: (t.innerText || '').trim().slice(0, 80)}});
  }});
  const pre = document.createElement('pre');
  pre.id = '{_MARK}';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}});
</script>"""


def chromium() -> str | None:
    """The Chromium binary on the PATH (``chromium`` or ``chromium-browser``), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def wide_tables(page: Path, browser: str, timeout: float = 60.0) -> list[dict]:
    """``{"index", "over", "head"}`` of each table of ``page`` wider than its box at :data:`WINDOW` (``over``: by
    how many pixels). The page is copied beside itself so that its relative links (styles, fonts) still resolve."""
    page = page.resolve()
    html = page.read_text(encoding="utf-8")
    with tempfile.NamedTemporaryFile("w", suffix=".html", dir=page.parent, delete=False, encoding="utf-8") as f:
        f.write(html.replace("</body>", _SCRIPT + "</body>") if "</body>" in html else html + _SCRIPT)
        copy = Path(f.name)
    try:
        with tempfile.TemporaryDirectory() as profile:
            proc = subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}", "--proxy-server=127.0.0.1:9",
                 "--virtual-time-budget=5000", "--dump-dom", copy.as_uri()],
                capture_output=True, text=True, timeout=timeout)
    finally:
        copy.unlink(missing_ok=True)
    m = re.search(rf'<pre id="{_MARK}"[^>]*>(.*?)</pre>', proc.stdout, re.S)
    if m is None:
        raise RuntimeError(f"{page}: Chromium returned no layout ({browser} exit {proc.returncode}: "
                           f"{' '.join(proc.stderr.split())[-200:]})")
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))
