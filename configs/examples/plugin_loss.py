"""A loss of one's own, registered from outside the package:
``umlkit train CONFIG --plugin this_file.py``.

The file is imported before the configuration is read, so its ``register_loss`` call makes the
name usable in ``objective`` (configs/examples/plugin_loss.yaml). Here: a normalised-softmax
(NormFace-style) loss over learnable class proxies, Wang et al., ACM MM 2017: cross-entropy over
scale * cos(embedding, proxy). A loss declares what the training engine must pass it (``inputs``,
names from ``umlkit.losses.INPUTS``); its parameters (the proxies) train in the optimizer's
``loss`` group (``optimizer.lr_mult.loss``).
"""
import torch
from torch import nn

from umlkit.losses import register_loss


class NormSoftmaxLoss(nn.Module):
    inputs = ("embeddings", "labels")

    def __init__(self, num_classes: int, embedding_size: int, scale: float = 16.0):
        super().__init__()
        self.proxies = nn.Parameter(torch.randn(num_classes, embedding_size) / embedding_size ** 0.5)
        self.scale = scale

    def forward(self, embeddings, labels):
        cos = nn.functional.normalize(embeddings, dim=1) @ nn.functional.normalize(self.proxies, dim=1).T
        return nn.functional.cross_entropy(self.scale * cos, labels)


@register_loss("norm_softmax_example", implementation="configs/examples/plugin_loss.py NormSoftmaxLoss",
               source="Wang et al. 2017 (NormFace): scale 16", defaults=dict(scale=16.0))
def _norm_softmax(num_classes, embedding_size, **options):
    return NormSoftmaxLoss(num_classes, embedding_size, **options)
