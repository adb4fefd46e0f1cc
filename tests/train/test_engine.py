"""Training engine on a tiny model and two small UML-Mini sources: determinism, resume after kill -9, NaN stop,
truncated checkpoints, parameter groups and warm-up, configs."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from umlkit.train import (
    CheckpointError,
    TrainingDivergedError,
    apply_overrides,
    fit,
    load_checkpoint,
    load_config,
    param_groups,
    read_log,
    resolve_config,
)
from umlkit.train.config import DEFAULTS

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def tiny_cfg(root, **train):
    return {"name": "tiny", "data": {"root": str(root), "datasets": ["flowers", "aircraft"], "batch_size": 32},
            "model": {"method": "puma", "pretrained": False, "embed_dim": 16,
                      "options": {"adapter_dim": 4, "pool_size": 3, "prompt_length": 1}},
            "loss": {"name": "cosface"}, "optimizer": {"lr": 1e-3},
            "train": {"epochs": 3, "progress": False, **train}}


@pytest.mark.slow
def test_same_seed_twice_identical_metrics(small_root, tmp_path):
    a = fit(tiny_cfg(small_root, epochs=2), run_dir=tmp_path / "a")
    b = fit(tiny_cfg(small_root, epochs=2), run_dir=tmp_path / "b")
    assert [h["loss"] for h in a.history] == [h["loss"] for h in b.history]
    assert a.last.equals(b.last)
    assert set(a.summary().columns) == {"last epoch", f"best on test (epoch {a.best_epoch})"}
    log = read_log(tmp_path / "a")
    assert list(log["epoch"]) == [1, 2] and "test.Unified.R@1" in log.columns and "lr.head" in log.columns
    c = fit(tiny_cfg(small_root, epochs=2), run_dir=tmp_path / "c", overrides=["seed=1"])
    assert [h["loss"] for h in c.history] != [h["loss"] for h in a.history]


_CHILD = """
import sys, json
from umlkit.train import fit
cfg = json.loads(sys.argv[1])
fit(cfg, run_dir=sys.argv[2], resume=True)
"""


@pytest.mark.slow
def test_kill_9_then_resume_equals_uninterrupted(small_root, tmp_path):
    cfg = tiny_cfg(small_root, epochs=3)
    full = fit(cfg, run_dir=tmp_path / "full")
    run = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(cfg), str(run)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not (run / "latest.pt").exists():
        time.sleep(0.05)
    time.sleep(0.3)  # somewhere inside epoch 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (run / "latest.pt").exists(), "the child never wrote a checkpoint"
    done = load_checkpoint(run / "latest.pt")["epoch"]
    assert done < 3, "the child finished before it was killed; the test did not test resumption"
    resumed = fit(cfg, run_dir=run, resume=True)
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]
    assert resumed.last.equals(full.last)
    assert len(read_log(run)) == 3


def test_nan_stops_cleanly_with_last_good_checkpoint(small_root, tmp_path):
    cfg = tiny_cfg(small_root, epochs=3)
    steps = 600 // 32  # flowers + aircraft training images / batch
    with pytest.raises(TrainingDivergedError, match=r"epoch 2, step 3.*last good checkpoint"):
        fit(cfg, run_dir=tmp_path, _fail_at_step=steps + 2)
    state = load_checkpoint(tmp_path / "latest.pt")
    assert state["epoch"] == 1
    resumed = fit(cfg, run_dir=tmp_path, resume=True)  # the intact checkpoint is usable
    assert resumed.history[-1]["epoch"] == 3


class _Watched(torch.Tensor):
    """A loss value that logs every read of it on the host (``bool``, ``float``) into ``_Watched.events``."""
    events: list = []

    def __bool__(self):
        _Watched.events.append("read")
        return super().__bool__()

    def __float__(self):
        _Watched.events.append("read")
        return super().__float__()


def test_loss_read_once_per_step_after_the_update_is_queued(small_root, tmp_path, monkeypatch):
    """The training loop reads the loss on the host once per step, after the backward and the optimiser step (a
    read before the backward would make a GPU idle while the host waits); the logged mean is the mean of those
    reads."""
    from umlkit.train import engine
    forward, step = engine._TrainStep.forward, engine._backward_and_step
    monkeypatch.setattr(engine._TrainStep, "forward", lambda *a: forward(*a).as_subclass(_Watched))
    monkeypatch.setattr(engine, "_backward_and_step", lambda *a: (_Watched.events.append("step"), step(*a))[1])
    _Watched.events = []
    res = fit(tiny_cfg(small_root, epochs=1), run_dir=tmp_path)
    steps = res.history[0]["steps"]
    assert steps > 1 and _Watched.events == ["step", "read"] * steps


def test_epoch_logs_the_seconds_spent_waiting_for_the_loader(small_root, tmp_path, monkeypatch):
    """``data_seconds``: the loop's time blocked on the loader. A loader slowed by 4 ms per image (600 training
    images) makes the epoch wait at least 2.4 s, and the wait is part of the epoch's seconds."""
    from umlkit.data.unified import UnifiedDataset
    get = UnifiedDataset.__getitem__

    def slow(self, i):
        time.sleep(0.004)
        return get(self, i)
    fast = fit(tiny_cfg(small_root, epochs=1), run_dir=tmp_path / "fast").history[0]
    monkeypatch.setattr(UnifiedDataset, "__getitem__", slow)
    slowed = fit(tiny_cfg(small_root, epochs=1), run_dir=tmp_path / "slow").history[0]
    assert 0 <= fast["data_seconds"] <= fast["seconds"]
    assert slowed["data_seconds"] >= fast["data_seconds"] + 600 * 0.004 * 0.9
    assert slowed["data_seconds"] <= slowed["seconds"] and slowed["loss"] == fast["loss"]


def test_truncated_checkpoint_clear_error_previous_usable(small_root, tmp_path):
    cfg = tiny_cfg(small_root, epochs=2)
    fit(cfg, run_dir=tmp_path)
    latest = tmp_path / "latest.pt"
    latest.write_bytes(latest.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="truncated or corrupt.*previous.pt"):
        fit(cfg, run_dir=tmp_path, resume=True)
    assert load_checkpoint(tmp_path / "previous.pt")["epoch"] == 1
    res = fit(cfg, run_dir=tmp_path, resume=tmp_path / "previous.pt")
    assert res.history[-1]["epoch"] == 2


def test_param_groups_lr_multipliers_and_warmup(small_root, tmp_path):
    from umlkit.losses import create_loss
    from umlkit.models import create_model
    for method, expect in (("puma", {"new", "head", "loss"}), ("full", {"backbone", "head", "loss"}),
                           ("lora", {"new", "head", "loss"}), ("bitfit", {"backbone", "head", "loss"})):
        m = create_model("vit_tiny_uml", method, embed_dim=8)
        groups = param_groups(m, create_loss("cosface", num_classes=5, embedding_size=8))
        assert {k for k, v in groups.items() if v} == expect, method
        n = sum(p.numel() for v in groups.values() for p in v)
        assert n == sum(p.numel() for p in m.parameters() if p.requires_grad) + 5 * 8
    cfg = tiny_cfg(small_root, epochs=1, warmup_epochs=1)
    cfg["model"] = {"method": "full", "pretrained": False, "embed_dim": 16}
    cfg["optimizer"] = {"lr": 1e-3, "lr_mult": {"backbone": 1.0, "head": 10.0, "loss": 100.0}}
    torch.manual_seed(0)
    before = create_model("vit_tiny_uml", "full", embed_dim=16).state_dict()
    res = fit(cfg, run_dir=tmp_path)
    after = res.model.state_dict()
    key = next(k for k in before if k.endswith("blocks.0.attn.qkv.weight"))
    assert torch.equal(before[key], after[key])
    assert not torch.equal(before["head.weight"], after["head.weight"])
    assert res.history[0]["lr"] == {"backbone": 1e-3, "head": 1e-2, "loss": 1e-1}


def test_config_files_profiles_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\noptimizer:\n  lr: 0.01\nprofiles:\n  full:\n    train:\n      epochs: 100\n")
    quick = load_config(path)
    full = load_config(path, profile="full", overrides=["optimizer.lr=3e-5", "data.datasets=[cub,cars]"])
    assert quick["train"]["epochs"] == 10 and full["train"]["epochs"] == 100
    assert full["optimizer"]["lr"] == 3e-5 and full["data"]["datasets"] == ["cub", "cars"]
    assert quick["optimizer"]["weight_decay"] == 1e-4  # defaults fill the rest
    with pytest.raises(KeyError, match="unknown key 'lrr'"):
        apply_overrides(quick, ["optimizer.lrr=1"])
    with pytest.raises(ValueError, match=r"override 'data.datasets=\[cub': the value is not valid YAML"):
        apply_overrides(quick, ["data.datasets=[cub"])
    with pytest.raises(KeyError, match="unknown key 'optimiser' in the config"):
        apply_overrides(quick, ["optimiser.lr=1"])
    assert apply_overrides(quick, ["model.options.adapter_dim=8"])["model"]["options"] == {"adapter_dim": 8}
    with pytest.raises(KeyError, match="unknown config section"):
        resolve_config({"optimiser": {}})
    with pytest.raises(ValueError, match="profile"):
        resolve_config({}, profile="slow")


def test_the_full_profile_reads_umlkit_data_when_data_root_is_unset(tmp_path, monkeypatch):
    monkeypatch.setenv("UMLKIT_DATA", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match=r"absent \(UMLKIT_DATA, or data.root\), which does not exist"):
        fit({"profile": "full", "train": {"progress": False}})
    (tmp_path / "absent").mkdir()
    with pytest.raises(FileNotFoundError, match=r"CUB-200-2011 \(cub\) not found under .*absent"):
        fit({"profile": "full", "train": {"progress": False}})


def _no_training(*args, **kwargs):
    pytest.fail("an epoch was trained")


def test_an_empty_test_part_is_refused_before_training_naming_the_part_source_and_keys(tmp_path, monkeypatch):
    """An aircraft annotation holding only its first-half (training) variants, its count check off: the test part
    is empty (it used to train, then drop the source from the results or fail in torch.cat); refused up front."""
    from umlkit.data import make_mini
    from umlkit.train import engine
    root = make_mini(tmp_path / "mini", seed=0, sources=["flowers", "aircraft"])
    data = root / "fgvc-aircraft-2013b" / "data"
    first = {v.split(" ", 1)[0] for v in sorted((data / "variants.txt").read_text().splitlines())[:25]}
    listed = data / "images_variant_trainvaltest.txt"
    listed.write_text("".join(f"{ln}\n" for ln in listed.read_text().splitlines() if ln.split(" ", 2)[1] in first))
    monkeypatch.setattr(engine, "_train_epoch", _no_training)
    cfg = tiny_cfg(root, epochs=1)
    cfg["data"]["expected"] = None
    with pytest.raises(ValueError, match=r"the 'test' part of source 'aircraft' \(FGVC-Aircraft\) has no images, "
                                         r"from the aircraft annotation's own test split under .*data.expected = null"):
        fit(cfg, run_dir=tmp_path / "run")
    assert not (tmp_path / "run" / "log.jsonl").exists()


def test_an_empty_train_or_val_part_is_refused_before_training_naming_the_keys(small_root, tmp_path, monkeypatch):
    """data.splits gives aircraft one training class and data.val_fraction holds out one class: nothing trains."""
    from umlkit.train import engine
    monkeypatch.setattr(engine, "_train_epoch", _no_training)
    cfg = tiny_cfg(small_root, epochs=1)
    cfg["data"].update(splits={"aircraft": {"train": [1], "test": [26, 27]}}, val_fraction=0.5)
    with pytest.raises(ValueError, match=r"the 'train' part of source 'aircraft' .* from data.splits.aircraft.train; "
                                         r"data.val_fraction = 0.5"):
        fit(cfg, run_dir=tmp_path / "train")
    cfg["data"].update(splits={"aircraft": {"train": [1, 2], "test": [26, 27]}}, val_fraction=0.0, few_shot=2)
    fit_data = engine.build_data(resolve_config(cfg), engine.backbone_data_config("vit_tiny_uml"))   # non-empty: fine
    assert all(len(part) for part in fit_data[:2]) and fit_data[2] is None


@pytest.mark.parametrize("config, error, match", [
    # a misspelt key inside a section (from a dict or a YAML file) would be kept beside the default and ignored
    ({"train": {"epoch": 2}}, KeyError,
     r"unknown key\(s\) \['epoch'\] in config section train \(did you mean 'epochs'\?\); known: .*epochs"),
    ({"data": {"batchsize": 16}}, KeyError, r"\['batchsize'\] in config section data"),
    ({"optimizer": {"learning_rate": 1e-2}}, KeyError, r"\['learning_rate'\] in config section optimizer"),
    ({"profiles": {"quick": {"clip": {"maximum": 1}}}}, KeyError, r"\['maximum'\] in config section clip"),
    ({"optimizer": {"lr_mult": {"bakcbone": 0.0}}}, KeyError, r"parameter group\(s\) \['bakcbone'\] in optimizer"),
    ({"model": {"options": [1]}}, ValueError, r"model.options = \[1\]: expected a mapping"),
    ({"train": 3}, ValueError, r"config section train = 3: expected a mapping"),
    # values that pass a type check but would train something else than asked
    ({"clip": {"mode": "norm", "max": -1}}, ValueError, r"clip.max = -1: expected a finite number > 0"),
    ({"clip": {"mode": "sum"}}, ValueError, r"clip.mode = 'sum': expected value, norm or null"),
    ({"schedule": {"name": "multistep", "milestones": "5"}}, ValueError, r"schedule.milestones = '5': expected a list"),
    ({"schedule": {"gamma": 0}}, ValueError, r"schedule.gamma = 0: expected a finite number > 0"),
    ({"data": {"augment": "no"}}, ValueError, r"data.augment = 'no': expected true or false"),
    ({"data": {"cache": "false"}}, ValueError, r"data.cache = 'false': expected true or false"),
    ({"data": {"datasets": "cub"}}, ValueError, r"data.datasets = 'cub': expected a non-empty list"),
    ({"data": {"expected": "none"}}, ValueError, r"data.expected = 'none': expected auto, null"),
    ({"train": {"epochs": 2, "warmup_epochs": 3}}, ValueError,
     r"train.warmup_epochs = 3: expected at most train.epochs"),
    ({"objective": [{"name": "triplet", "weight": -1}]}, ValueError, r"objective.0.weight = -1.0: expected a finite "
                                                                     r"number >= 0"),
    ({"objective": [{"name": "triplet", "options": [1]}]}, ValueError, r"objective.0.options = \[1\]: expected a map"),
    ({"train": {"metrics": []}}, ValueError, r"train.metrics = \[\]: expected a non-empty list"),   # IndexError
    ({"profiles": {"quick": [1, 2]}}, ValueError, r"profiles = .*: expected \{quick: "),            # AttributeError
])
def test_config_keys_and_values_are_checked_when_resolved(tmp_path, config, error, match):
    with pytest.raises(error, match=match):
        resolve_config(config)
    path = tmp_path / "c.yaml"     # a YAML file goes through the same checks
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(error, match=match):
        load_config(path)


def test_every_shipped_config_resolves_under_the_key_checks():
    """Every run configuration under configs/ (a file whose keys are a run's) resolves in both profiles; the other
    YAML files there are method blocks, splits and plans, read by the papers' own loaders."""
    root = Path(__file__).resolve().parents[2] / "configs"
    loaded = []
    for path in sorted(root.rglob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        if isinstance(raw, dict) and set(raw) <= set(DEFAULTS) | {"profiles", "loss"}:
            for profile in ("quick", "full"):
                cfg = load_config(path, profile=profile)
                assert cfg["profile"] == profile and cfg["objective"], path
            loaded.append(path.relative_to(root).as_posix())
    assert loaded == ["examples/explicit_split.yaml", "examples/plugin_loss.yaml", "examples/plugin_method.yaml",
                      "examples/two_term_objective.yaml", "oodml/oodml.yaml", "puma/full_finetune.yaml",
                      "puma/puma.yaml", "vptsp/vptsp.yaml"]


def test_resume_after_changing_the_architecture_names_checkpoint_and_keys(small_root, tmp_path):
    run = tmp_path / "run"
    cfg = tiny_cfg(small_root, epochs=1)
    fit(cfg, run_dir=run)
    saved = (run / "config.json").read_bytes()
    changed = tiny_cfg(small_root, epochs=2)
    changed["model"]["embed_dim"] = 24
    with pytest.raises(ValueError) as err:     # the run folder's config.json says what the checkpoint was
        fit(changed, run_dir=run, resume=True)
    msg = str(err.value)
    assert f"differs from {run / 'config.json'} in model.embed_dim. A resumed run" in msg   # epochs may change
    assert (run / "config.json").read_bytes() == saved
    # a checkpoint taken into a new folder has no config.json beside it: the state that does not fit is named
    with pytest.raises(RuntimeError) as err:
        fit(changed, run_dir=tmp_path / "new", resume=run / "latest.pt")
    assert str(run / "latest.pt") in str(err.value) and "model state" in str(err.value)
    assert load_checkpoint(run / "latest.pt")["epoch"] == 1      # nothing was overwritten


def test_resume_refuses_a_changed_training_configuration_and_keeps_config_json(small_root, tmp_path):
    """Resuming with another learning rate, seed or objective would continue the run under settings its
    config.json then claims for the whole run; only where and how long it runs may change (train.epochs)."""
    run = tmp_path / "run"
    cfg = tiny_cfg(small_root, epochs=1)
    fit(cfg, run_dir=run)
    saved = (run / "config.json").read_bytes()
    for key, value in (("optimizer.lr", 0.5), ("seed", 7), ("data.batch_size", 16)):
        changed = resolve_config(cfg, overrides=[f"{key}={value}"])
        with pytest.raises(ValueError, match=rf"differs from {re.escape(str(run / 'config.json'))} in {key}\b"):
            fit(changed, run_dir=run, resume=True)
        assert (run / "config.json").read_bytes() == saved
        assert load_checkpoint(run / "latest.pt")["epoch"] == 1
    # a checkpoint two epochs in, resumed into a one-epoch run: refused before config.json is rewritten
    fit(resolve_config(cfg, overrides=["train.epochs=2"]), run_dir=tmp_path / "two")
    with pytest.raises(ValueError, match=r"train.epochs = 1: the checkpoint has trained 2 epochs already"):
        fit(cfg, run_dir=run, resume=tmp_path / "two" / "latest.pt")
    assert (run / "config.json").read_bytes() == saved
    longer = resolve_config(cfg, overrides=["train.epochs=2"])
    assert fit(longer, run_dir=run, resume=True).history[-1]["epoch"] == 2
    assert json.loads((run / "config.json").read_text())["config"]["train"]["epochs"] == 2



def test_nan_embeddings_stop_as_a_diverged_step_not_as_a_loss_input_error(small_root, tmp_path):
    cfg = tiny_cfg(small_root, epochs=3)
    steps = 600 // 32
    with pytest.raises(TrainingDivergedError, match=r"embeddings became NaN.*epoch 2, step 3.*last good checkpoint"):
        fit(cfg, run_dir=tmp_path, _poison_at_step=steps + 2)
    assert load_checkpoint(tmp_path / "latest.pt")["epoch"] == 1


def _vptsp_cfg(root, optimizer, **options):
    cfg = tiny_cfg(root, epochs=2)
    cfg["model"] = {"method": "vptsp", "pretrained": False, "embed_dim": 16, "options": {"num_prompts": 1, **options}}
    cfg["loss"] = {"name": "proxy_anchor_external"}
    cfg["data"].update({"sampler": "class_random", "samples_per_class": 4})
    cfg["optimizer"] = optimizer
    return cfg


def _class_prompts(model):
    return [p.detach().reshape(model.num_classes, -1) for p in model.class_prompts]


@pytest.mark.slow
def test_cpu_resident_class_prompts_train_as_on_the_device(small_root, tmp_path):
    """With plain SGD a row that is not in the batch does not move, so the lazy row-sparse optimizer of CPU-resident
    class prompts must give exactly the dense run: same losses, metrics and prompts."""
    sgd = {"name": "sgd", "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0}
    dense = fit(_vptsp_cfg(small_root, sgd), run_dir=tmp_path / "dense")
    cpu = fit(_vptsp_cfg(small_root, sgd, class_prompts_device="cpu"), run_dir=tmp_path / "cpu")
    assert [h["loss"] for h in cpu.history] == [h["loss"] for h in dense.history]
    assert cpu.last.equals(dense.last)
    from umlkit.train.engine import build_model
    torch.manual_seed(0)  # as fit seeds the model's initialisation
    before = _class_prompts(build_model(resolve_config(_vptsp_cfg(small_root, sgd)), dense.model.num_classes))
    moved = [not torch.equal(a, b) for a, b in zip(_class_prompts(cpu.model), before)]
    assert all(moved)
    for a, b in zip(_class_prompts(cpu.model), _class_prompts(dense.model)):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_cpu_resident_class_prompts_resume_with_their_optimizer_state(small_root, tmp_path):
    """AdamW keeps per-row moments for CPU-resident prompts; a run stopped in epoch 2 and resumed from the epoch-1
    checkpoint (prompts and row states saved) equals the uninterrupted run."""
    adamw = {"name": "adamw", "lr": 1e-3, "weight_decay": 1e-4}
    cfg = _vptsp_cfg(small_root, adamw, class_prompts_device="cpu")
    full = fit(cfg, run_dir=tmp_path / "full")
    from umlkit.data import build_sampler
    from umlkit.models.backbones import backbone_data_config
    from umlkit.train.engine import build_data
    resolved = resolve_config(cfg)
    train_set = build_data(resolved, backbone_data_config(resolved["model"]["backbone"]))[0]
    steps = len(build_sampler("class_random", train_set.labels, 32, 4, train_set.sources))
    with pytest.raises(TrainingDivergedError):
        fit(cfg, run_dir=tmp_path / "cut", _fail_at_step=steps + 2)
    saved = load_checkpoint(tmp_path / "cut" / "latest.pt")
    assert saved["epoch"] == 1 and len(saved["sparse_optimizer"]["state"]) == len(full.model.sparse_parameters())
    assert "cpu_class_prompts.0" in saved["model"]
    resumed = fit(cfg, run_dir=tmp_path / "cut", resume=True)
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]
    for a, b in zip(_class_prompts(resumed.model), _class_prompts(full.model)):
        assert torch.equal(a, b)


def test_resolved_fp16_with_cpu_resident_prompts_is_refused_before_training(small_root, tmp_path, monkeypatch):
    """precision 'auto' resolves to fp16 on a GPU without bf16: the sparse optimizer's check reads the resolved
    precision, not the configured word."""
    from umlkit.train import engine
    monkeypatch.setattr(engine, "resolve_precision", lambda name, device: "fp16" if name == "auto" else name)
    cfg = _vptsp_cfg(small_root, {"name": "adamw", "lr": 1e-3}, class_prompts_device="cpu")
    cfg["precision"] = "auto"
    with pytest.raises(ValueError, match=r"precision fp16 \(config precision='auto'\)"):
        fit(cfg, run_dir=tmp_path / "run")


def test_loader_workers_auto_serve_the_evaluation_too(small_root, tmp_path, monkeypatch):
    """``data.num_workers: auto`` (every full-profile job's setting) once reached the evaluation's loader unresolved
    and stopped the run after its first epoch; the log row counts the epoch's steps."""
    import umlkit.train.evaluate as evaluate
    seen = []
    real = evaluate.extract_embeddings

    def spy(model, dataset, batch_size, device, num_workers, *args, **kw):
        seen.append(num_workers)
        return real(model, dataset, batch_size, device, num_workers, *args, **kw)

    import umlkit.train.engine as engine
    steps = []
    real_step = engine._backward_and_step
    monkeypatch.setattr(engine, "_backward_and_step", lambda *a: (steps.append(1), real_step(*a))[1])
    monkeypatch.setattr(evaluate, "extract_embeddings", spy)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)     # auto -> 0 workers: no loader processes in the test
    cfg = tiny_cfg(small_root, epochs=1, eval_every=1)
    cfg["data"]["num_workers"] = "auto"
    res = fit(cfg, run_dir=tmp_path / "auto")
    assert seen == [0] and res.last is not None
    assert res.history[0]["steps"] == len(steps) > 0


def test_train_compile_is_optional_checked_and_leaves_unset_keys_alone():
    """``train.compile`` (issue 60 item 7) is an optional key: a configuration that does not set it resolves, and
    hashes, exactly as before it existed (the committed records keep their keys); a bad mode names the key, the value
    and the modes; ``--set train.compile=...`` reaches it."""
    from umlkit.experiments.runs.records import normalise_key
    from umlkit.train.engine import run_dir_for
    plain = resolve_config({"name": "t"})
    assert "compile" not in plain["train"] and "compile" not in normalise_key(plain)["train"]
    assert set(plain["train"]) == set(DEFAULTS["train"])
    graphs = resolve_config({"name": "t"}, overrides=["train.compile=reduce-overhead"])
    assert graphs["train"]["compile"] == "reduce-overhead" and run_dir_for(graphs) != run_dir_for(plain)
    with pytest.raises(ValueError, match=r"train\.compile = 'fast'.*off, default, reduce-overhead"):
        resolve_config({"train": {"compile": "fast"}})


@pytest.mark.heavy   # make test-all only: inductor compiles the step for about 35 s on 2 cores
def test_compiled_training_forward_trains_to_the_eager_metrics(small_root, tmp_path):
    """The compiled forward is the same model: two epochs give the eager run's per-epoch losses to 1e-5 (the compiled
    kernels reorder floating-point sums) and its test R@1 within 2 points (after two epochs the tiny model's
    retrieval has many near ties, and such float differences flip a few of 380 queries: 1.6 points measured on Zen 4),
    and the checkpoint holds the plain module's keys. The adapters keep every branch (keep_prob 1.0): inductor draws
    its own random numbers, so a stochastic adapter's drops, and with them the whole trajectory, differ by design."""
    def cfg(**train):
        c = tiny_cfg(small_root, epochs=2, **train)
        c["model"]["options"]["keep_prob"] = 1.0
        return c
    eager = fit(cfg(), run_dir=tmp_path / "eager")
    compiled = fit(cfg(compile="default"), run_dir=tmp_path / "compiled")
    assert [h["loss"] for h in compiled.history] == pytest.approx([h["loss"] for h in eager.history], rel=1e-5)
    diff = (eager.last["R@1"] - compiled.last["R@1"]).abs().max()
    assert diff <= 2.0, f"compiled R@1 differs from eager by {diff}"
    keys = load_checkpoint(tmp_path / "compiled" / "latest.pt")["model"].keys()
    assert not any("_orig_mod" in k for k in keys)
