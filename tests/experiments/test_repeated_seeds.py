"""Issue 83: a seed listed twice in a table's declaration (the table's list, a group's entry or a row's own seeds) is
refused when the table is built, naming the table, the list and the seed; a declaration without repeats builds."""
import types

import pytest

from umlkit.experiments.tables.builder import build_table
from umlkit.experiments.tables.table import Row


def _config():
    mod = types.ModuleType("toy_config")

    def rows(names, seeds=None):
        return [Row(method=n, spec={"seeds": seeds} if seeds else {}, label=n) for n in names]

    def config_for(row, seed, profile="quick", overrides=()):
        return {"method": row.method, "seed": seed}
    mod.rows, mod.config_for = rows, config_for
    return mod


def _build(decl):
    return build_table("toy", "Table 1", decl, _config(), {"tables": {"Table 1": decl}})


def test_a_table_built_with_distinct_seeds_keeps_them():
    t = _build({"rows": [{"build": "rows", "names": ["A", "B"]}], "seeds": [0, 1, 2]})
    assert [t.seeds_of(r) for r in t.rows] == [(0, 1, 2), (0, 1, 2)]


@pytest.mark.parametrize("decl, named", [
    ({"rows": [{"build": "rows", "names": ["A"]}], "seeds": [0, 1, 1]}, "seeds lists seed(s) [1]"),
    ({"rows": [{"build": "rows", "names": ["A"]}], "seeds": {"*": [0, 2, 2, 0]}}, "seeds['*'] lists seed(s) [0, 2]"),
    ({"rows": [{"build": "rows", "names": ["A"], "seeds": [3, 3]}], "seeds": [0]}, "row 'A' seeds lists seed(s) [3]"),
])
def test_a_seed_listed_twice_is_refused_naming_the_table_and_the_list(decl, named):
    with pytest.raises(ValueError) as err:
        _build(decl)
    assert "toy tables.yaml: tables['Table 1']" in str(err.value) and named in str(err.value)
    assert "give each seed once" in str(err.value)
