"""Readable labels (issue 59, item 5): a paper's declared words for a setting, else "key value" pairs."""
import pytest

from umlkit.experiments.tables import labels


def test_declared_words_then_the_generic_spelling():
    assert labels.readable("prompt=Sing.;adapter=none") == "single prompt"        # PUMA's tables.yaml
    assert labels.readable("batch_size=64/32;arch=ViT-S16;dim=384").startswith("ViT-S/16, 384-d")   # VPTSP's
    assert labels.readable("split=1;FID=3.4") == "split 1, FID 3.4"
    assert labels.readable("max_lr=0.1") == "max lr 0.1"
    assert labels.readable("Hyp-ViT") == "Hyp-ViT" and labels.readable("") == ""


def test_every_declared_label_names_a_setting_a_table_uses():
    """A label for a setting no table row or claim has would be dead words (a renamed setting)."""
    from umlkit.experiments.tables.registry import papers
    from umlkit.experiments.tables.table import paper_table
    used = {r.setting for p in papers().values() for spec in p.claim_tables("quick").values() for r in spec.rows}
    used |= set(paper_table("vptsp", "Table 2")["setting"]) | set(paper_table("puma", "Table 3")["setting"])
    assert set(labels.label_map()) <= used, set(labels.label_map()) - used


def test_labels_that_are_not_words_are_refused(tmp_path, monkeypatch):
    pkg = tmp_path / "toy_paper"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tables.yaml").write_text("labels: {a=1: [not, words]}\n")
    monkeypatch.setenv("UMLKIT_PAPERS", str(pkg))
    labels.label_map.cache_clear()
    try:
        with pytest.raises(ValueError, match="tables.yaml: 'labels' must map a setting to its words"):
            labels.label_map()
    finally:
        monkeypatch.delenv("UMLKIT_PAPERS")
        labels.label_map.cache_clear()
