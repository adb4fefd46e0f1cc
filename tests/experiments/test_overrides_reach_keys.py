"""Issue 82 item 2: an override reaches every record key it applies to. Every row of every declared claim table of
every registered paper is keyed with and without one; a row whose key ignored it would be served the stored
default-configuration record under the override's name (the language-guidance unified rows once were)."""
import json

from umlkit.experiments.tables.registry import papers

OVERRIDE = "optimizer.weight_decay=0.000123"   # a value no configuration uses, in a section every key holds


def _rows():
    for name, paper in papers().items():
        for table, spec in paper.claim_tables("quick").items():
            for row in spec.rows:
                yield name, table, spec, row


def _text(key) -> str:
    return json.dumps(key, sort_keys=True, default=str)


def test_an_override_changes_every_key_or_is_refused_in_words():
    """Each key changes, or the paper refuses overrides with an error saying so (the regime map declares its runs
    in configs/regime and takes none); nothing keys the same run under and without the override."""
    ignored, refused, changed = [], set(), 0
    for name, table, spec, row in _rows():
        seed = spec.seeds_of(row, "quick")[0]
        plain = spec.config(row, seed, "quick", ())
        try:
            over = spec.config(row, seed, "quick", (OVERRIDE,))
        except ValueError as err:
            assert "override" in str(err), (name, table, row.label, err)
            refused.add(name)
            continue
        if _text(over) == _text(plain):
            ignored.append(f"{name} / {table} / {row.label or row.title}")
        else:
            changed += 1
    assert not ignored, ignored
    assert changed > 500 and refused <= {"regime"}, (changed, refused)


def test_the_unified_setting_keys_its_overrides():
    from umlkit.experiments.papers import language_guidance as lg
    spec = lg.TABLES("quick")["Unified setting"]
    row = next(r for r in spec.rows if r.spec.get("guidance"))
    key = spec.config(row, 0, "quick", ("train.epochs=3",))
    cfg = key["config"] if "config" in key else key
    assert cfg["train"]["epochs"] == 3
