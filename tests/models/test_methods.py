"""Behaviour of the PEFT modules: exactness against timm, PUMA's official details, VPTSP's proxy branch."""
import copy

import pytest
import torch
from safetensors.torch import save_file

from umlkit.models import create_backbone, create_model
from umlkit.models.layers import Adapter, PromptPool, build_accumulator
from umlkit.models.layers.accumulators import ACCUMULATORS

TINY = "vit_tiny_uml"


def _images(n=3, size=32, seed=0):
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(seed))


def _timm_features(model):
    vit = model.backbone.vit
    return lambda x: vit.forward_head(vit.forward_features(x), pre_logits=True)


@pytest.mark.parametrize("method,kw", [
    ("linear", {}), ("adapter", {}), ("stochastic_adapter", {}), ("puma", {"use_prompts": False}),
    ("lora", {}), ("adaptformer", {}), ("bitfit", {}),
])
def test_features_equal_timm_bit_for_bit(method, kw):
    torch.manual_seed(0)
    model = create_model(TINY, method, embed_dim=16, **kw).eval()
    x = _images()
    with torch.no_grad():
        assert torch.equal(model.features(x), _timm_features(model)(x))


def test_vit_small_exactness_with_adapters():
    torch.manual_seed(0)
    model = create_model("vit_s16_in21k_ft_in1k", "puma", use_prompts=False).eval()
    x = _images(1, 224)
    with torch.no_grad():
        assert torch.equal(model.features(x), _timm_features(model)(x))


def test_puma_adapter_init_and_stochastic_keep():
    torch.manual_seed(0)
    model = create_model(TINY, "puma", embed_dim=16)
    body = model.backbone
    for a_attn, a_mlp in zip(body.adapters_attn, body.adapters_mlp):
        assert torch.equal(a_attn.down.weight, a_mlp.down.weight)  # same D copied to both adapters
        assert not a_attn.up.weight.any()  # U starts at zero
        assert a_attn.down.bias is None and a_attn.up.bias is None
        assert not any(p is a_attn.scale for p in model.parameters())  # fixed scale, no gradient
        bound = (3.0 / a_attn.down.weight.shape[1]) ** 0.5  # kaiming_uniform(a=1): sqrt(3 / fan_in)
        assert a_attn.down.weight.abs().max() <= bound
    adapter = Adapter(8, bottleneck=4, keep_prob=0.5)
    torch.nn.init.normal_(adapter.up.weight)
    x = torch.randn(64, 5, 8)
    adapter.eval()
    full = adapter(x)
    adapter.train()
    torch.manual_seed(1)
    out = adapter(x)
    dropped = (out == 0).flatten(1).all(dim=1)
    kept = torch.isclose(out, 2 * full, atol=1e-6).flatten(1).all(dim=1)
    assert bool((dropped | kept).all())  # whole samples are dropped or kept x2 (per sample, not per token)
    assert 10 < int(dropped.sum()) < 54


def test_prompt_pool_formula_and_quirk():
    torch.manual_seed(0)
    pool = PromptPool(dim=16, pool_size=5, length=3)
    assert all(torch.equal(pool.prompts[0], pool.prompts[m]) for m in range(5))  # official identical init
    fixed = PromptPool(dim=16, pool_size=5, length=3, identical_init=False)
    assert not torch.equal(fixed.prompts[0], fixed.prompts[1])
    q = torch.randn(4, 16)
    with torch.no_grad():
        prompt, w = pool(q)
    for b in range(4):
        for m in range(5):
            att = q[b] * torch.softmax(pool.attention[m].detach(), dim=0)
            key = pool.keys[m].detach()
            cos = torch.dot(att / att.norm(), key / key.norm())
            assert w[b, m] == pytest.approx(float(cos) / (1 + 1e-5) ** 0.5, abs=1e-6)
    want = torch.einsum("bm,mld->bld", w, pool.prompts.detach())
    assert torch.allclose(prompt, want)
    with torch.no_grad():
        ortho = sum(((t @ t.T - torch.eye(5)) ** 2).mean()
                    for t in (pool.keys, pool.attention, pool.prompts.reshape(5, -1)))
    assert float(pool.orthogonality_loss().detach()) == pytest.approx(1e-6 * float(ortho))


def test_prompt_pool_query_is_detached_and_weights_recorded():
    model = create_model(TINY, "prompt_pool", embed_dim=16, pool_size=4, prompt_length=2)
    pool = model.backbone.prompt_pool
    seen = []
    real_forward = pool.forward
    pool.forward = lambda query: (seen.append(query.requires_grad), real_forward(query))[1]
    x = _images(2).requires_grad_(True)  # the image carries gradient, so only an explicit detach cuts it
    emb = model(x)
    emb.sum().backward()
    assert seen == [False]  # PUMA's query is detached
    assert x.grad is not None and pool.prompts.grad is not None  # the prompts themselves still learn
    assert model.backbone.last_prompt_weights.shape == (2, 4)


def test_vpt_deep_counts_and_effect():
    model = create_model(TINY, "vpt_deep", embed_dim=16, num_prompts=6, prompt_depth=4, prompt_step=2)
    assert [p.shape[1] for p in model.backbone.deep] == [6, 4, 2, 0]
    plain = create_model(TINY, "linear", embed_dim=16)
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if "deep" not in k}, strict=False)
    x = _images(2)
    assert model(x).shape == (2, 16)
    assert not torch.allclose(model.features(x), plain.features(x))


def test_trainable_sets():
    m = create_model(TINY, "bitfit", embed_dim=16)
    names = {n for n, p in m.named_parameters() if p.requires_grad}
    assert names and all(n.endswith("bias") or n.startswith("head.") for n in names)
    z = create_model(TINY, "zero_shot")
    assert not any(p.requires_grad for p in z.parameters())
    assert z(_images(2)).shape == (2, 96)  # the tiny ViT's width: zero-shot has no head
    f = create_model(TINY, "full", embed_dim=16)
    assert all(p.requires_grad for p in f.parameters())


def test_vptsp_proxy_branch():
    torch.manual_seed(0)
    model = create_model(TINY, "vptsp", embed_dim=16, num_classes=6, num_prompts=4, class_prompts=2,
                         class_prompt_depth=3, accumulator="ema", proxy_bias_ratio=0.3)
    x = _images(4)
    labels = torch.tensor([1, 1, 4, 4])
    before = model.container.clone()
    model.train()
    with torch.no_grad():
        out = model.forward_train(x, labels)
        emb, proxies = out["embeddings"], out["proxies"]
    assert emb.shape == (4, 16) and proxies.shape == (6, 16)
    # rows of classes outside the batch only move by the re-normalisation (they were unit norm already)
    untouched = [0, 2, 3, 5]
    assert torch.allclose(model.container[untouched], before[untouched], atol=1e-6)
    assert not torch.allclose(model.container[[1, 4]], before[[1, 4]])
    # EMA: new row = normalise(0.8 old + 0.2 mean of the class's proxy features)
    with torch.no_grad():
        prompts = [p[labels] if p.shape[1] else None for p in model.class_prompts]
        feat = model.backbone.forward_features(x, layer_prompts=prompts, use_task_prompts=False)
        pf = torch.nn.functional.normalize(model.proxy_head(feat), dim=-1)
    want = torch.nn.functional.normalize(0.8 * before[1] + 0.2 * pf[:2].mean(0), dim=0)
    assert torch.allclose(model.container[1], want, atol=1e-5)
    assert torch.allclose(proxies, 0.3 * model.proxy_bias + 0.7 * model.container, atol=1e-6)
    with pytest.raises(ValueError, match="grouped by class"):
        model.forward_train(x, torch.tensor([1, 4, 1, 4]))
    with pytest.raises(ValueError, match="labels must lie"):
        model.forward_train(x, torch.tensor([1, 1, 9, 9]))


@pytest.mark.parametrize("source", ["sample", "encoder", "fixed_encoder"])
def test_vptsp_proxy_sources(source):
    model = create_model(TINY, "vptsp", embed_dim=8, num_classes=3, proxy_source=source)
    out = model.forward_train(_images(4), torch.tensor([0, 0, 2, 2]))
    emb, proxies = out["embeddings"], out["proxies"]
    (emb.sum() + proxies.sum()).backward()
    # proxies = alpha * bias + (1 - alpha) * memory, alpha 0.5 by default (the official CUB value): every entry of
    # the learnable bias gets d(sum of proxies)/d(bias) = alpha, whatever the memory's source
    grad = model.proxy_bias.grad
    assert grad is not None and torch.equal(grad, torch.full_like(grad, 0.5))


def test_vptsp_cpu_class_prompts():
    model = create_model(TINY, "vptsp", embed_dim=8, num_classes=5, class_prompts_device="cpu")
    assert model.sparse_parameters() and not any("class_prompts" in n for n, _ in model.named_parameters())
    proxies = model.forward_train(_images(2), torch.tensor([3, 3]))["proxies"]
    proxies.sum().backward()
    grads = model.sparse_parameters()[0].grad
    assert grads.is_sparse and grads.coalesce().indices().tolist() == [[3]]   # only the batch's class has a row
    assert grads.to_dense()[3].abs().sum() > 0
    state = model.state_dict()
    assert tuple(state["cpu_class_prompts.0"].shape) == (5, model.sparse_parameters()[0].shape[1])
    other = create_model(TINY, "vptsp", embed_dim=8, num_classes=5, class_prompts_device="cpu")
    other.load_state_dict(state)
    assert torch.equal(other.sparse_parameters()[0], model.sparse_parameters()[0])
    with pytest.raises(RuntimeError, match="cpu_class_prompts.0"):
        create_model(TINY, "vptsp", embed_dim=8, num_classes=4, class_prompts_device="cpu").load_state_dict(state)


@pytest.mark.parametrize("name", ACCUMULATORS)
def test_accumulators(name):
    acc = build_accumulator(name, 8)
    h, x = torch.randn(3, 8), torch.randn(3, 2, 8)
    out = acc(h, x)
    assert out.shape == (3, 8) and torch.isfinite(out).all()
    if name == "gru_relu":
        assert sum(p.numel() for p in acc.parameters()) == 6 * 64 + 3 * 8
        # the cell by hand: one sample
        wx, wh, b = acc.w_x.weight, acc.w_h.weight, acc.bias
        z = torch.sigmoid(x[:, 0] @ wx[:8].T + h @ wh[:8].T + b[:8])
        r = torch.sigmoid(x[:, 0] @ wx[8:16].T + h @ wh[8:16].T + b[8:16])
        n = torch.relu(x[:, 0] @ wx[16:].T + r * (h @ wh[16:].T) + b[16:])
        assert torch.allclose(acc.cell(x[:, 0], h), (1 - z) * n + z * h, atol=1e-6)


def test_gru_accumulator_matches_torch_gru_cell():
    """The `gru` variant is torch.nn.GRUCell once the layouts are mapped: torch orders the gates (r, z, n) and keeps
    two bias vectors, b_ih and b_hh, with b_hn inside the reset gate; the accumulator orders them (z, r, n) and has one
    bias, outside it - so b_ih = (b_r, b_z, b_n) and b_hh = 0 give the same cell. Outputs and gradients must agree
    over a sequence of k samples."""
    torch.manual_seed(0)
    d = 6
    acc = build_accumulator("gru", d)
    with torch.no_grad():
        acc.bias.normal_()
    ref = torch.nn.GRUCell(d, d)

    def reorder(w):  # (z, r, n) -> torch's (r, z, n)
        z, r, n = w.chunk(3, dim=0)
        return torch.cat([r, z, n])
    with torch.no_grad():
        ref.weight_ih.copy_(reorder(acc.w_x.weight))
        ref.weight_hh.copy_(reorder(acc.w_h.weight))
        ref.bias_ih.copy_(reorder(acc.bias))
        ref.bias_hh.zero_()
    h0, x = torch.randn(4, d), torch.randn(4, 3, d)
    out = acc(h0, x)
    h = h0
    for j in range(x.shape[1]):
        h = ref(x[:, j], h)
    assert torch.allclose(out, h, atol=1e-6)
    out.square().sum().backward()
    h.square().sum().backward()
    assert torch.allclose(reorder(acc.w_x.weight.grad), ref.weight_ih.grad, atol=1e-5)
    assert torch.allclose(reorder(acc.w_h.weight.grad), ref.weight_hh.grad, atol=1e-5)
    assert torch.allclose(reorder(acc.bias.grad), ref.bias_ih.grad, atol=1e-5)
    # gru_relu differs from it only in the candidate's activation
    relu = build_accumulator("gru_relu", d)
    relu.load_state_dict(acc.state_dict())
    assert not torch.allclose(relu(h0, x), out.detach())


def test_local_weights_and_hub_error(tmp_path, monkeypatch):
    src = create_backbone(TINY)
    path = tmp_path / "tiny.safetensors"
    save_file({k: v.contiguous() for k, v in src.state_dict().items()}, str(path))
    loaded = create_backbone(TINY, weights=path)
    assert all(torch.equal(a, b) for a, b in zip(src.state_dict().values(), loaded.state_dict().values()))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        create_backbone(TINY, weights=tmp_path / "missing.safetensors")
    # no hub here: simulate what huggingface_hub raises offline, and check the message names both options
    import umlkit.models.backbones as backbones

    real = backbones.timm.create_model

    def offline(name, pretrained=False, **kw):
        if pretrained and "pretrained_cfg_overlay" not in kw:
            raise OSError("We couldn't connect to the Hugging Face Hub")
        return real(name, pretrained=pretrained, **kw)

    monkeypatch.setattr(backbones.timm, "create_model", offline)
    monkeypatch.setattr(backbones, "hub_unreachable", lambda *a, **k: None)  # the hub answers, timm then fails
    with pytest.raises(RuntimeError, match="weights=") as err:
        create_backbone("vit_s16_in21k_ft_in1k", pretrained=True)
    assert "internet" in str(err.value) and "vit_small_patch16_224.augreg_in21k_ft_in1k" in str(err.value)


def test_resnet_and_errors():
    model = create_model("resnet18", "linear", embed_dim=16, freeze_bn=True)
    assert model(torch.randn(2, 3, 64, 64)).shape == (2, 16)
    assert model.data_config["input_size"] == (3, 224, 224)
    with pytest.raises(ValueError, match="needs a ViT"):
        create_model("resnet18", "puma")
    with pytest.raises(ValueError, match="unknown method"):
        create_model(TINY, "prefix")
    with pytest.raises(TypeError, match="unexpected option"):
        create_model(TINY, "linear", rank=4)
    with pytest.raises(ValueError, match="unknown backbone"):
        create_model("not_a_model", "linear")
    with pytest.raises(ValueError, match="num_classes"):
        create_model(TINY, "vptsp")
    for bad in (0, -3, "64", 12.5, True):   # 0 built a model with (B, 0) embeddings
        with pytest.raises(ValueError, match=f"embed_dim must be an integer >= 1, got {bad!r}"):
            create_model(TINY, "linear", embed_dim=bad)
    with pytest.raises(ValueError, match="pretrained must be True or False, got 'no'"):
        create_model(TINY, "linear", pretrained="no")


@pytest.mark.parametrize("method", ["puma", "vpt", "lora", "adaptformer", "full", "vptsp"])
def test_memory_light_mode_gives_the_same_gradients(method):
    """checkpoint_blocks recomputes each block in the backward pass; with the RNG state preserved, PUMA's stochastic
    adapters draw the same masks, so the loss and every gradient equal the plain run's."""
    kw = {"num_classes": 4} if method == "vptsp" else {}
    x, y = _images(4), torch.tensor([0, 0, 1, 1])
    grads = []
    for light in (False, True):
        torch.manual_seed(0)
        model = create_model(TINY, method, embed_dim=16, checkpoint_blocks=light, **kw).train()
        torch.manual_seed(1)
        out = model.forward_train(x, y)["embeddings"] if method == "vptsp" else model(x)
        out.square().sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for n in grads[0]:
        assert torch.allclose(grads[0][n], grads[1][n], atol=1e-6), n
    with pytest.raises(ValueError, match="checkpoint_blocks needs a ViT"):
        create_model("resnet18", "full", checkpoint_blocks=True)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_skip_dropped_adapters_match_the_dense_path(precision):
    """PUMA's skip_dropped option draws the same per-sample masks from the same RNG stream, runs each adapter on its
    kept samples only (fewer rows reach the down-projection) and gives the dense path's output and gradients."""
    x = _images(8)
    runs = []
    for skip in (False, True):
        torch.manual_seed(0)
        model = create_model(TINY, "puma", embed_dim=16, skip_dropped=skip).train()
        with torch.no_grad():  # non-zero up-projections, so the adapters change the output
            for a in [*model.backbone.adapters_attn, *model.backbone.adapters_mlp]:
                a.up.weight.normal_(0, 0.2)
        rows = []
        model.backbone.adapters_mlp[0].down.register_forward_hook(lambda m, i, o: rows.append(i[0].shape[0]))
        torch.manual_seed(1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = model(x)
        after = torch.rand(3)  # the RNG stream continues identically
        out.float().square().sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        runs.append((out.detach().float(), after, rows[0], grads))
    (dense, r0, rows0, g0), (sparse, r1, rows1, g1) = runs
    assert rows0 == 8 and 0 < rows1 < 8  # at seed 1 the first MLP adapter keeps some but not all samples
    assert torch.equal(r0, r1)
    tol = dict(rtol=1e-5, atol=1e-6) if precision == "fp32" else dict(rtol=2e-2, atol=2e-3)
    torch.testing.assert_close(sparse, dense, **tol)
    assert g0.keys() == g1.keys() and any("adapters" in n for n in g0)
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], **tol, msg=n)


def test_low_precision_adapters_match_the_plain_path(monkeypatch):
    """Under bf16 autocast PUMA casts each LayerNorm output once and multiplies the bottleneck by scale x keep
    instead of the output: the same masks from the same RNG stream, and output and gradients no further from fp32
    than the plain bf16 path's."""
    from umlkit.models import peft_vit
    from umlkit.models.layers import adapter as adapter_mod
    x = _images(8)

    def run(plain: bool, precision: str):
        with monkeypatch.context() as m:
            if plain:   # the path before the low-precision one: autocast casts per reader, scale on the output
                m.setattr(adapter_mod, "_low_precision", lambda t: False)
                m.setattr(peft_vit.PEFTViT, "_cast_once", lambda self, h: h)
            torch.manual_seed(0)
            model = create_model(TINY, "puma", embed_dim=16).train()
            with torch.no_grad():
                for a in [*model.backbone.adapters_attn, *model.backbone.adapters_mlp]:
                    a.up.weight.normal_(0, 0.2)
            torch.manual_seed(1)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                out = model(x)
            after = torch.rand(3)
            (out.float() * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()   # not constant under
            return out.detach().float(), after, {n: p.grad for n, p in model.named_parameters()   # the L2 norm
                                                 if p.grad is not None}

    o32, r32, g32 = run(True, "fp32")   # the fp32 reference (fp32 itself: test_fp32_adapter_is_the_formula_...)
    (o0, r0, g0), (o1, r1, g1) = run(True, "bf16"), run(False, "bf16")
    assert torch.equal(r0, r32) and torch.equal(r1, r32) and g1.keys() == g32.keys()   # the same masks were drawn

    def error(a, b):   # relative to fp32, the reference both bf16 paths approximate (all gradients as one vector)
        a, b = [torch.cat([t[n].float().flatten() for n in g32]) if isinstance(t, dict) else t for t in (a, b)]
        return ((a.float() - b).norm() / b.norm()).item()
    assert error(o1, o32) <= 1.5 * error(o0, o32) < 0.02   # no less accurate than the plain bf16 path
    # (the plain path's own bf16 gradient error: 0.074 since D starts at the official scale, sqrt(3) larger)
    assert error(g1, g32) <= 1.5 * error(g0, g32) < 0.15


@pytest.mark.parametrize("keep, skip, training", [(0.5, False, True), (0.5, True, True), (0.5, False, False),
                                                  (1.0, False, True), (1.0, True, True)])
def test_fp32_adapter_is_the_formula_the_records_were_trained_with(keep, skip, training):
    """In fp32, ``add_to`` is bit for bit ``residual + DropPath(1 - keep)(up(ReLU(down x)) * scale)`` with the same
    draws (the order of the committed records); a model cast wholly to bf16 or fp16 (no autocast) runs and keeps its
    dtype."""
    from timm.layers import DropPath
    h, res = torch.randn(6, 5, 12), torch.randn(6, 5, 12)
    a = Adapter(12, 4, keep_prob=keep, skip_dropped=skip).train(training)
    with torch.no_grad():
        a.up.weight.normal_()
    drop = DropPath(1.0 - keep) if keep < 1 else torch.nn.Identity()
    drop.train(training)
    torch.manual_seed(5)
    want = res + drop(a.up(torch.relu(a.down(h))) * a.scale)
    torch.manual_seed(5)
    assert torch.equal(a.add_to(res, h), want)
    for dtype in (torch.bfloat16, torch.float16):
        low = copy.deepcopy(a).to(dtype)
        torch.manual_seed(5)   # the same per-sample draws in the narrower dtype
        out = low.add_to(res.to(dtype), h.to(dtype))
        assert out.dtype == dtype
        torch.testing.assert_close(out.float(), want, rtol=5e-2, atol=5e-2)


def test_skip_dropped_adapter_alone_is_exact_and_static_adapters_ignore_it():
    """One adapter, fp32: same kept samples, bit-identical output rows; keep_prob=1 has nothing to skip."""
    h, res = torch.randn(6, 5, 12), torch.randn(6, 5, 12)
    dense, sparse = Adapter(12, 4, keep_prob=0.5), Adapter(12, 4, keep_prob=0.5, skip_dropped=True)
    with torch.no_grad():
        dense.up.weight.normal_()
    sparse.load_state_dict(dense.state_dict())
    torch.manual_seed(3)
    a = res + dense(h)
    torch.manual_seed(3)
    b = sparse.add_to(res, h)
    assert torch.equal(a, b)
    kept = (a != res).flatten(1).any(1)
    assert 0 < kept.sum() < 6  # some samples dropped at this seed: their rows are the residual itself
    static = Adapter(12, 4, keep_prob=1.0, skip_dropped=True)
    assert torch.equal(static.add_to(res, h), res + static(h))


def test_checkpoint_a_block_count(monkeypatch):
    """checkpoint_blocks=k recomputes the first k blocks only (same gradients); bad counts name the value."""
    import torch.utils.checkpoint as ckpt
    calls = []
    real = ckpt.checkpoint
    monkeypatch.setattr(ckpt, "checkpoint", lambda fn, i, *a, **k: calls.append(i) or real(fn, i, *a, **k))
    x = _images(4)
    grads = []
    for light in (False, 2):
        torch.manual_seed(0)
        model = create_model(TINY, "puma", embed_dim=16, checkpoint_blocks=light).train()
        torch.manual_seed(1)
        model(x).square().sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert calls == [0, 1]  # only blocks 0 and 1, once each (the recomputation calls the block, not checkpoint)
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], rtol=0, atol=1e-6, msg=n)
    depth = len(model.backbone.vit.blocks)
    for bad in (depth + 1, -1, 1.5, "yes", None):
        with pytest.raises(ValueError, match=f"checkpoint_blocks={bad!r}.*block count in \\[0, {depth}\\]"):
            create_model(TINY, "puma", checkpoint_blocks=bad)
    from types import SimpleNamespace

    from umlkit.models._factory import _memory_light
    plain = SimpleNamespace(backbone=create_backbone(TINY))  # a registered method may hand timm's ViT over as is
    with pytest.raises(ValueError, match="checkpoints all .* or none"):
        _memory_light(plain, "custom", 1)
    _memory_light(plain, "custom", True)
    assert plain.backbone.grad_checkpointing


@pytest.mark.parametrize("method, option, value", [("puma", "pool_size", 0), ("puma", "adapter_dim", 0),
                                                   ("lora", "rank", 0), ("mlp3", "hidden", 2.5),
                                                   ("vpt", "num_prompts", True), ("prompt_pool", "prompt_length", -1)])
def test_a_size_option_below_one_is_refused_by_name(method, option, value):
    from umlkit.models import create_model
    with pytest.raises(ValueError, match=rf"model option {option} = {value!r}: expected a whole number >= 1"):
        create_model("vit_tiny_uml", method, embed_dim=8, **{option: value})


def test_puma_adapter_and_vptsp_prompts_start_at_the_official_scales():
    """PUMA's D is kaiming-uniform (a=1) on the (dim, r) tensor: bound sqrt(3 / r), not sqrt(3 / dim); VPTSP's prompts
    are xavier-normal on the official 3-D tensors (class prompts (C, N, D): std sqrt(2 / ((C + N) D)))."""
    import math
    torch.manual_seed(0)
    model = create_model(TINY, "puma", embed_dim=16, adapter_dim=8)
    d = model.backbone.adapters_attn[0].down.weight   # (r, dim): D transposed
    r, dim = d.shape
    assert d.abs().max() <= math.sqrt(3 / r) and d.abs().max() > 0.95 * math.sqrt(3 / r) > math.sqrt(3 / dim) * 1.5
    vptsp = create_model(TINY, "vptsp", embed_dim=16, num_classes=50, num_prompts=4, prompt_depth=2)
    prompts = vptsp.class_prompts[0]
    c, n, width = prompts.shape
    assert float(prompts.detach().std()) == pytest.approx(math.sqrt(2 / ((c + n) * width)), rel=0.05)
    deep = torch.cat([p.detach().flatten() for p in vptsp.backbone.deep])   # (1, 4, 96) each: 768 draws
    assert float(deep.std()) == pytest.approx(math.sqrt(2 / ((1 + 4) * width)), rel=0.1)


def _block_by_hand(blk, x, adapter=None, on_norm=False):
    """One timm block, with an AdaptFormer adapter parallel to its MLP (input: the stream or LN2's output)."""
    x = x + blk.attn(blk.norm1(x))
    h = blk.norm2(x)
    out = blk.mlp(h)
    if adapter is not None:
        out = out + adapter(h if on_norm else x)
    return x + out


@pytest.mark.parametrize("variant", ["adaptformer", "puma", "vptsp"])
def test_adaptformer_variants_by_hand(variant):
    """PUMA's AdaptFormer reads LN2's output (models/prompt.py); VPTSP's AdapterLayer reads the stream, scales by
    1.0, LayerNorms its output and sits on the last L blocks (architectures/peft_vit.py: _setup_adapter)."""
    torch.manual_seed(0)
    model = create_model(TINY, "adaptformer", embed_dim=16, adapter_dim=8, layers=2, variant=variant).eval()
    body = model.backbone
    for a in body.adaptformer:
        torch.nn.init.normal_(a.up.weight)
        if a.ln is not None:
            torch.nn.init.normal_(a.ln.weight)
    assert [a.scale for a in body.adaptformer] == [1.0 if variant == "vptsp" else 0.1] * 2
    assert all((a.ln is not None) == (variant == "vptsp") for a in body.adaptformer)
    vit = body.vit
    depth = len(vit.blocks)
    first = depth - 2 if variant == "vptsp" else 0
    x = vit._pos_embed(vit.patch_embed(_images(2)))
    with torch.no_grad():
        want = x
        for i, blk in enumerate(vit.blocks):
            a = body.adaptformer[i - first] if first <= i < first + 2 else None
            want = _block_by_hand(blk, want, a, on_norm=variant == "puma")
        got = x
        for i, blk in enumerate(vit.blocks):
            got = body._block(i, blk, got)
    assert torch.allclose(got, want, atol=1e-5)


def test_an_unknown_adaptformer_variant_is_named():
    with pytest.raises(ValueError, match=r"variant = 'roth'.*\['adaptformer', 'puma', 'vptsp'\]"):
        create_model(TINY, "adaptformer", embed_dim=16, variant="roth")
