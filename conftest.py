"""Test-session set-up shared by tests/ and the book's notebooks (nbval): nothing is written into the checkout.

Data (UML-Mini is generated on first use) goes to a temporary folder, and results go to a temporary copy of the
committed run records (and committed measurements and language files), so chapters executed by nbval read them
and write their tables elsewhere.
The variables are set at import, before any kernel starts, so the notebooks' kernels inherit them. A variable the
caller already set is kept.
"""
import os
import shutil
import tempfile
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
_TMP = Path(tempfile.mkdtemp(prefix="umlkit-tests-"))
os.environ.setdefault("UMLKIT_PROGRESS", "0")  # no progress bars in test logs or executed notebooks
os.environ.setdefault("UMLKIT_CACHE", str(_TMP / "cache"))  # the per-machine GEMM speed-ups (metrics.kernels)
if not os.environ.get("UMLKIT_DATA"):
    os.environ["UMLKIT_DATA"] = str(_TMP / "data")
if not os.environ.get("UMLKIT_RESULTS"):
    records = _ROOT / "results" / "quick" / "records"
    if records.is_dir():
        shutil.copytree(records, _TMP / "results" / "quick" / "records")
    for stored in (_ROOT / "results" / "quick").glob("uml_mini_fid_range.*"):  # committed measurements
        shutil.copy2(stored, _TMP / "results" / "quick" / stored.name)
    # the committed language files the records were trained with: a file made again on another CPU can differ in
    # its rounded embeddings' last digit, hence in its sha256, and the records' keys would no longer match
    language = _ROOT / "results" / "quick" / "language"
    if language.is_dir():
        shutil.copytree(language, _TMP / "results" / "quick" / "language")
    os.environ["UMLKIT_RESULTS"] = str(_TMP / "results")
