"""The method registry of create_model: register_method, the built-in METHODS, errors unchanged."""
from __future__ import annotations

import pytest
import torch

from umlkit.models import (
    METHODS,
    MethodBuild,
    _factory,
    build_body,
    create_model,
    finish,
    method_entry,
    pop_options,
    register_method,
)

TINY = "vit_tiny_uml"


def test_builtin_methods_in_their_order():
    assert METHODS == ("zero_shot", "full", "linear", "mlp3", "vpt", "vpt_deep", "prompt_pool", "adapter",
                       "stochastic_adapter", "puma", "lora", "adaptformer", "bitfit", "vptsp", "layernorm")
    assert [m for m in METHODS if method_entry(m).cnn] == ["zero_shot", "full", "linear", "mlp3", "bitfit"]
    assert [m for m in METHODS if method_entry(m).needs_num_classes] == ["vptsp"]


def test_errors_are_unchanged():
    with pytest.raises(ValueError, match="unknown method 'nope'; choose one of zero_shot, full, linear, mlp3, vpt,"):
        create_model(TINY, "nope")
    with pytest.raises(TypeError, match=r"unexpected option\(s\) for method 'vpt': \['pool_size'\]"):
        create_model(TINY, "vpt", pool_size=3)
    with pytest.raises(ValueError, match="method 'lora' needs a ViT backbone; resnet18.tv_in1k supports zero_shot, "
                                         "full, linear, mlp3, bitfit"):
        create_model("resnet18", "lora")


@pytest.fixture
def scratch_method():
    added = []
    yield added
    for name in added:
        _factory._METHODS.pop(name, None)


def test_register_method_adds_a_method_to_create_model(scratch_method):
    scratch_method.append("shallow_bitfit")

    @register_method("shallow_bitfit")
    def build(b: MethodBuild):  # VPT shallow prompts + BitFit, from the public builder API
        (n,) = pop_options(b.kw, num_prompts=2)
        b.bitfit = True
        return finish(b, build_body(b, shallow_prompts=n))

    torch.manual_seed(0)
    m = create_model(TINY, "shallow_bitfit", embed_dim=8, num_prompts=3)
    torch.manual_seed(0)
    ref = create_model(TINY, "vpt", embed_dim=8, num_prompts=3, bitfit=True)
    assert m.method == "shallow_bitfit" and m.embed_dim == 8
    assert [(n, p.requires_grad) for n, p in m.named_parameters()] == \
        [(n, p.requires_grad) for n, p in ref.named_parameters()]
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), ref.state_dict().values()))
    assert "shallow_bitfit" not in METHODS  # METHODS lists the built-in methods
    with pytest.raises(TypeError, match="unexpected option"):
        create_model(TINY, "shallow_bitfit", rank=2)
    with pytest.raises(ValueError, match="'shallow_bitfit' is already registered"):
        register_method("shallow_bitfit", lambda b: None)


def test_the_builder_api_is_public_and_the_old_private_names_are_the_same_objects():
    """Issue 82, item 6: a plugin builds a method from umlkit.models' public names; the private names that came
    before them stay, as the same objects (built-in methods unchanged)."""
    import umlkit.models
    assert {"MethodBuild", "pop_options", "build_body", "finish", "register_method"} <= set(umlkit.models.__all__)
    assert (_factory._Build, _factory._pop, _factory._body, _factory._finish) == (MethodBuild, pop_options,
                                                                                   build_body, finish)
    for obj in (MethodBuild, pop_options, build_body, finish, register_method):
        assert obj.__doc__ and len(obj.__doc__) > 100, obj
    assert pop_options({"rank": 4}, rank=128, alpha=None) == [4, None]
    with pytest.raises(ValueError, match=r"model option rank = 0: expected a whole number >= 1 \(model.options.rank\)"):
        pop_options({"rank": 0}, rank=128)
