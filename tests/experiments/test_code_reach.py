"""The code part of a record's fingerprint reaches the shared training path and the losses the run uses: a new loss
in a module of its own stales nothing, a changed loss stales exactly the runs that reach it (issue 41)."""
import shutil

import pytest

from umlkit.experiments.papers.puma import run_config
from umlkit.experiments.runs import code_reach as cr
from umlkit.experiments.runs import fingerprint as fp

NEW_LOSS = '''"""A user's loss."""
import torch
from torch import nn


class MyLoss(nn.Module):
    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None):
        return embeddings.pow(2).mean()
'''


@pytest.fixture
def pkg(tmp_path):
    """A copy of the package's training path whose files a test may edit; the hash caches cleared around it."""
    root = tmp_path / "umlkit"
    for part in fp.CODE_PARTS:
        src = fp._PKG / part
        if src.suffix == ".py":
            (root / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, root / part)
        else:
            shutil.copytree(src, root / part, ignore=shutil.ignore_patterns("__pycache__", "weights"))
    fp.code_hash.cache_clear()
    fp._shared_names.cache_clear()
    cr.loss_code.cache_clear()
    yield root
    fp.code_hash.cache_clear()
    fp._shared_names.cache_clear()
    cr.loss_code.cache_clear()


def _hashes(root, names=("multisimilarity", "curricularface", "diva", "hyp")):
    fp.code_hash.cache_clear()
    fp._shared_names.cache_clear()
    cr.loss_code.cache_clear()
    return {n: fp.code_hash((n,), pkg=root) for n in names}


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_a_new_loss_in_its_own_module_stales_no_record(pkg):
    before = _hashes(pkg)
    (pkg / "losses" / "my_loss.py").write_text(NEW_LOSS)
    init = pkg / "losses" / "__init__.py"
    _edit(init, "from umlkit.losses.roth_margin import RothMarginLoss\n",
          "from umlkit.losses.roth_margin import RothMarginLoss\nfrom umlkit.losses.my_loss import MyLoss\n")
    _edit(init, '"similarity_distillation", "to_poincare"]', '"similarity_distillation", "to_poincare", "MyLoss"]')
    init.write_text(init.read_text() + '\n\n@register_loss("my_loss", implementation="umlkit MyLoss", source="me")\n'
                    'def _my_loss(num_classes, embedding_size, **options):\n    return MyLoss()\n')
    assert _hashes(pkg) == before
    assert fp.code_hash(("my_loss",), pkg=pkg) not in before.values()


def test_a_changed_loss_stales_only_the_runs_that_reach_it(pkg):
    before = _hashes(pkg)
    _edit(pkg / "losses" / "curricular_face.py", "import math\n", "import math\n\n_UNUSED = 1\n")
    after = _hashes(pkg)
    assert after["curricularface"] != before["curricularface"]
    assert {k: after[k] for k in ("multisimilarity", "diva", "hyp")} == \
        {k: before[k] for k in ("multisimilarity", "diva", "hyp")}
    # DiVA and S2SD live in multi_head.py; DiVA's default base loss (Margin) is reached through its registration
    _edit(pkg / "losses" / "multi_head.py", "import torch\n", "import torch\n\n_UNUSED = 1\n")
    third = _hashes(pkg)
    assert third["diva"] != after["diva"] and third["multisimilarity"] == after["multisimilarity"]
    # a registration's defaults are part of that loss only
    _edit(pkg / "losses" / "__init__.py", 'defaults=dict(c=0.1, clip_r=2.3, tau=0.2,',
          'defaults=dict(c=0.1, clip_r=2.3, tau=0.25,')
    fourth = _hashes(pkg)
    assert fourth["hyp"] != third["hyp"] and fourth["curricularface"] == third["curricularface"]


def test_shared_code_stales_every_run_and_documentation_none(pkg):
    before = _hashes(pkg)
    _edit(pkg / "losses" / "curricular_face.py", '"""', '"""Reworded. ', )
    assert _hashes(pkg) == before                                  # a docstring
    _edit(pkg / "train" / "engine.py", "from __future__ import annotations\n",
          "from __future__ import annotations\n_UNUSED = 1\n")
    after = _hashes(pkg)
    assert all(after[k] != before[k] for k in before)
    # few-shot adaptation (shared code) creates Margin by name: its module is part of every run's code
    mid = after
    _edit(pkg / "losses" / "roth_margin.py", "import torch\n", "import torch\n_UNUSED = 1\n")
    assert all(v != mid[k] for k, v in _hashes(pkg).items())


def test_a_records_fingerprint_hashes_the_losses_of_its_objective():
    cfg = run_config("quick", method="puma")
    names = cr.reached_losses([cfg["objective"]], cr.loss_code(fp._PKG, tuple(
        f.relative_to(fp._PKG).as_posix() for f in fp._code_files())))
    assert {t["name"] for t in cfg["objective"]} <= set(names) and "margin" not in names
    code = cr.loss_code(fp._PKG, tuple(f.relative_to(fp._PKG).as_posix() for f in fp._code_files()))
    assert "losses/roth_margin.py" in code.shared_modules   # few-shot adaptation's criterion: shared by every run
    assert fp.fingerprint(cfg)["code"] == fp.code_hash(tuple(names))
    diva = {**cfg, "objective": [{"name": "diva", "weight": 1.0, "options": {"base": "multisimilarity"}}]}
    reached = cr.reached_losses([diva["objective"]], cr.loss_code(fp._PKG, tuple(
        f.relative_to(fp._PKG).as_posix() for f in fp._code_files())))
    assert {"diva", "multisimilarity", "margin"} <= set(reached)     # its base, and its registration's default
