"""A method of one's own, registered from outside the package:
``umlkit train CONFIG --plugin this_file.py``.

The file is imported before the configuration is read, so its ``register_method`` call makes the
name usable in ``model.method`` (configs/examples/plugin_method.yaml). Here: partial fine-tuning,
the classic transfer baseline that trains only the top of a pretrained network (Yosinski et al.,
NeurIPS 2014; the "partial fine-tuning" of MAE, He et al., CVPR 2022): the last ``blocks``
transformer blocks and the final LayerNorm train with the embedding head, the rest of the ViT
stays frozen. The builder uses only umlkit.models' public builder API: it receives a
``MethodBuild``, takes its options with ``pop_options``, makes the body with ``build_body`` and
ends with ``finish``, which checks that no option was left over and adds the head. The unfrozen
blocks train in the optimizer's ``backbone`` group (``optimizer.lr_mult.backbone``).
"""
from umlkit.models import MethodBuild, build_body, finish, pop_options, register_method


@register_method("partial_finetune_example")
def partial_finetune(b: MethodBuild):
    (blocks,) = pop_options(b.kw, blocks=2)    # model.options.blocks: how many of the last blocks train
    depth = len(b.net.blocks)
    if blocks > depth:
        raise ValueError(f"model option blocks = {blocks}: {b.timm_name} has {depth} blocks (model.options.blocks)")
    for block in b.net.blocks[depth - blocks:]:
        block.requires_grad_(True)
    b.net.norm.requires_grad_(True)            # the final LayerNorm reads the last block's output
    return finish(b, build_body(b))
