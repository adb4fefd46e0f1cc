"""Pinned CPU numerics for quick-profile records (umlkit._numerics, issue 74 item 5): what the pin sets, what it
leaves alone, that it reaches torch only before torch loads, and which commands take it."""
import json
import os
import subprocess
import sys

import pytest

from umlkit import _numerics as nm

needs_avx2 = pytest.mark.skipif(not nm.cpu_has_avx2(), reason="the pin applies only to a CPU with AVX2 and FMA")


@needs_avx2
def test_the_pin_sets_the_three_switches_and_keeps_a_value_the_user_set():
    env = {"MKL_CBWR": "COMPATIBLE"}
    assert nm.pin_for_records(env) == nm.NATIVE          # the user's MKL setting stays, so this is not the pin
    assert env == {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    fresh = {}
    assert nm.pin_for_records(fresh) == nm.PINNED and fresh == nm.PIN


def test_native_opts_out_and_sets_nothing():
    env = {nm.OPT_OUT: "native"}
    assert nm.pin_for_records(env) == nm.NATIVE and env == {nm.OPT_OUT: "native"}
    assert nm.mode({}) == nm.NATIVE


def _child(code: str, env_extra: dict | None = None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in nm.PIN and k != nm.OPT_OUT}
    done = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=120,
                          env={**env, **(env_extra or {})}, check=True)
    return done.stdout.split() + ["|"] + [line for line in done.stderr.splitlines() if "Warning" in line]


@needs_avx2
def test_pinned_before_torch_loads_torch_runs_its_avx2_kernels_and_deterministic_algorithms():
    out = _child("from umlkit._numerics import pin_for_records as p; m = p(); import torch; "
                 "print(m.replace(' ', '_'), torch.backends.cpu.get_cpu_capability(), "
                 "torch.are_deterministic_algorithms_enabled())")
    assert out[:3] == ["pinned_to_AVX2", "AVX2", "True"], out


@needs_avx2
def test_torch_loaded_first_trains_natively_and_says_so():
    out = _child("import torch; from umlkit._numerics import pin_for_records as p; print(p())")
    have = _child("import torch; print(torch.backends.cpu.get_cpu_capability())")[0]
    if have == "AVX2":   # an AVX2-only host: the native kernels are the pinned ones; MKL's switch is still unset
        assert out[0] == "native"
    assert out[0] == "native" and any("torch was imported before umlkit could pin" in w for w in out), out


@needs_avx2
@pytest.mark.parametrize("argv, pinned", [
    (["records", "train", "vptsp", "tables", "--table", "Table 6"], True),
    (["reproduce", "--table", "vptsp:table6"], True),
    (["records", "verify", "--sample", "1"], True),
    (["records", "train", "vptsp", "tables", "--dry-run"], False),     # trains nothing
    (["records", "train", "vptsp", "tables", "--profile", "full"], False),   # the full profile keeps its kernels
    (["records", "verify"], False),                                     # reads only
])
def test_the_commands_that_train_quick_records_pin_first(argv, pinned):
    code = ("import json, os; from umlkit.cli import build_parser, _pin_record_numerics; "
            f"a = build_parser().parse_args({json.dumps(argv)}); _pin_record_numerics(a); "
            "print(os.environ.get('MKL_CBWR', '-'))")
    assert _child(code)[0] == ("AVX2" if pinned else "-")


def test_a_record_keeps_the_numerics_it_was_trained_with(tmp_path, monkeypatch):
    from umlkit.experiments.runs import records
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    from umlkit.train import load_config
    key = {"config": load_config("configs/puma/puma.yaml", profile="quick")}   # a real key: it is fingerprinted
    rec = records.cached_record("toy", "t1", "one", key, lambda k: {"test": {"A": 1.0}}, "quick", log=None)
    stored = json.loads(open(rec["path"]).read())
    assert stored["software"]["numerics"] == nm.mode()
