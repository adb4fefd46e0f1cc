"""umlkit.train.config.merge against the plain definition (copy the base, merge mappings level by level), on random
nested mappings: same result, same key order, nothing shared with either input; and load_config's parse cache sees an
edited file."""
import copy
import json
import random

from umlkit.train.config import load_config, merge


def _reference(base, update):
    out = copy.deepcopy(base)
    for k, v in (update or {}).items():
        out[k] = _reference(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def _nested(rng, depth=0):
    if depth > 3 or rng.random() < 0.3:
        return rng.choice([1, "x", [1, {"a": 2}], None, {}])
    return {rng.choice("abcdef"): _nested(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def test_merge_equals_the_plain_definition_and_shares_nothing():
    rng = random.Random(0)
    pairs = [(a, b) for a, b in ((_nested(rng), _nested(rng)) for _ in range(2000))
             if isinstance(a, dict) and isinstance(b, dict)]
    assert len(pairs) > 500
    for a, b in pairs:
        a0, b0 = copy.deepcopy(a), copy.deepcopy(b)
        out = merge(a, b)
        assert json.dumps(out) == json.dumps(_reference(a, b))      # json.dumps keeps the key order
        for k, v in out.items():                                     # mutating the result leaves the inputs
            if isinstance(v, (dict, list)):
                v.clear()
        assert (a, b) == (a0, b0)


def test_an_edited_config_file_is_read_again(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("optimizer:\n  lr: 0.01\n")
    first = load_config(path)
    first["optimizer"]["lr"] = 5.0                                   # a caller's change does not reach the cache
    assert load_config(path)["optimizer"]["lr"] == 0.01
    path.write_text("optimizer:\n  lr: 0.02   \n")                   # another size: parsed again
    assert load_config(path)["optimizer"]["lr"] == 0.02
