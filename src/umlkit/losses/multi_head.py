"""ooDML's regularised objectives that need more than one embedding: Uniform Prior, S2SD and DiVA.

None of the three exists in pytorch-metric-learning, so they are written here; each wraps a base PML loss
(built by :func:`umlkit.losses.create_loss`) and keeps every learnable part (discriminators, projectors, the
auxiliary losses' proxies) as a parameter of the loss so the optimizer sees it. They are called like any PML
loss, with the extra outputs of :meth:`umlkit.models.EmbeddingModel.forward_train` as keywords::

    out = model.forward_train(images, labels)
    loss(out["embeddings"], labels, aux=out["aux"], features=out["features"])

Each declares the inputs it takes (``inputs``) and the heads it needs (``aux_heads(embedding_size, **options)``,
registered with the loss, see :func:`umlkit.losses.aux_heads_for`); ``create_model(..., aux_heads=...)`` builds
them.

* **Uniform Prior** (Sinha et al. 2020, "Uniform priors for data-efficient transfer"; ooDML's "Uniform Prior"):
  a discriminator D (MLP) separates the L2-normalised embeddings from samples of the uniform distribution on the
  unit sphere (normalised Gaussians); the embedding receives D's binary cross-entropy through a gradient-reversal
  layer, i.e. it is pushed to be indistinguishable from uniform. One backward pass trains both players.
  ``weight`` is not fixed by the ooDML text: 0.1 is umlkit's default; ooDML's scripts pass 0.2 (CUB, Cars) and
  0.02 (SOP). Known differences from ooDML's code (``--with_entropy`` in ``ood_main.py``): there the regulariser
  acts on the pooled backbone feature cut into 128-d chunks, against a uniform prior on the cube [-1, 1]^128, with a
  100-wide 3-layer discriminator updated every 10 iterations by its own Adam and a non-saturating generator loss;
  here it acts on the embedding, on the sphere, by gradient reversal every step.
* **S2SD** (Roth et al., ICML 2021; as ooDML's ``criteria/s2sd.py``): auxiliary heads of higher dimension (each
  Linear(D, t)-ReLU-Linear(t, t) on the backbone feature) are trained with their own copy of the base loss, and the
  main embedding distils their batch similarity structure. The loss is (L_source + mean_j L_target_j) / 2 +
  w * mean_j KL(softmax(S_j / T) || softmax(S / T)) (row-wise, batch mean; the target similarities S_j detached),
  plus ``feature_weight`` x the same KL towards the normalised backbone feature. Defaults: the S2SD repository's
  target dims 512/1024/1536/2048, T 1, w 50, feature weight 50; ooDML's scripts pass dims 1024/1536/2048 and w 5 on
  SOP (configs/oodml/methods.yaml). Not reproduced: the avg+max pooled target input (``--loss_s2sd_pool_aggr``) and
  the 1,000-iteration delay of feature distillation on SOP. The language-guidance paper sets w to 0 with ELG/PLG.
* **DiVA** (Milbich et al., ECCV 2020): four 128-d heads. The main (discriminative) head takes the base loss
  (margin); ``shared`` learns cross-class characteristics with triplets whose positive is the anchor's nearest
  neighbour *from another class*; ``intra`` learns intra-class variation with triplets drawn inside one class
  (positive = nearest same-class sample, negative = the farthest); ``selfsup`` is instance discrimination (PML's
  NTXentLoss, temperature 0.1 **[open]**; computed by :mod:`umlkit.losses.ntxent`, PML's numbers at a seventh
  of the cost) between two augmented views of each image (``views=`` the selfsup
  embeddings of the second view). Heads are decorrelated adversarially: a projector g_h maps the discriminative
  embedding towards head h and maximises their squared element-wise agreement; both embeddings receive the
  reversed gradient. Weights 0.3 per auxiliary task and decorrelation 1500 follow the DiVA code's documented
  settings as recalled by umlkit **[open]**; at evaluation the four heads are concatenated (``eval_concat_aux``).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from pytorch_metric_learning import losses as pml_losses
from torch import nn

from umlkit.losses._checks import check_inputs
from umlkit.losses.ntxent import NTXentLoss

__all__ = ["DiVALoss", "S2SDLoss", "UniformPriorLoss", "grad_reverse", "similarity_distillation"]


class _GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.scale * grad, None


def grad_reverse(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Identity forward, gradient multiplied by ``-scale`` backward (Ganin & Lempitsky 2015)."""
    return _GradReverse.apply(x, scale)


def similarity_distillation(student: torch.Tensor, teacher: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Mean over rows of KL(softmax(S_teacher / T) || softmax(S_student / T)); the teacher is detached.

    Both inputs are L2-normalised (B, d) embeddings (their dimensions may differ); S = X X^T.
    """
    s_student = student @ student.T / temperature
    s_teacher = (teacher @ teacher.T / temperature).detach()
    log_p_student = torch.log_softmax(s_student, dim=1)
    p_teacher = torch.softmax(s_teacher, dim=1)
    return nn.functional.kl_div(log_p_student, p_teacher, reduction="batchmean")


class UniformPriorLoss(nn.Module):
    inputs = ("embeddings", "labels")  # what the training engine passes (as keywords)

    def __init__(self, base: nn.Module, embedding_size: int, weight: float = 0.1, hidden: int = 512):
        super().__init__()
        self.base, self.weight, self.embedding_size = base, weight, embedding_size
        self.discriminator = nn.Sequential(nn.Linear(embedding_size, hidden), nn.ReLU(inplace=True),
                                           nn.Linear(hidden, 1))

    def regulariser(self, embeddings: torch.Tensor, prior_samples: torch.Tensor | None = None) -> torch.Tensor:
        """BCE of the discriminator: prior samples labelled 1, (gradient-reversed) embeddings labelled 0."""
        z = nn.functional.normalize(embeddings.to(self.discriminator[0].weight.dtype), dim=-1)
        if prior_samples is None:
            prior_samples = nn.functional.normalize(torch.randn_like(z), dim=-1)
        real = self.discriminator(prior_samples).squeeze(-1)
        fake = self.discriminator(grad_reverse(z)).squeeze(-1)
        bce = nn.functional.binary_cross_entropy_with_logits
        return bce(real, torch.ones_like(real)) + bce(fake, torch.zeros_like(fake))

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None, prior_samples=None,
                **_unused) -> torch.Tensor:
        check_inputs("uniform_prior", embeddings, labels, embedding_size=self.embedding_size)
        return (self.base(embeddings, labels, indices_tuple, ref_emb, ref_labels)
                + self.weight * self.regulariser(embeddings, prior_samples))


class S2SDLoss(nn.Module):
    DEFAULT_DIMS = (512, 1024, 1536, 2048)

    inputs = ("embeddings", "labels", "aux", "features")  # what the training engine passes (as keywords)

    @classmethod
    def aux_heads(cls, embedding_size: int = 128, target_dims=DEFAULT_DIMS, **_options) -> dict[str, tuple[int, str]]:
        """The target heads: ``s2sd_j`` of dimension ``target_dims[j]`` (Linear-ReLU-Linear on the feature)."""
        return {f"s2sd_{j}": (int(d), "mlp2") for j, d in enumerate(target_dims)}

    def __init__(self, base_factory: Callable[[int], nn.Module], embedding_size: int,
                 target_dims=DEFAULT_DIMS, temperature: float = 1.0, weight: float = 50.0,
                 feature_weight: float = 50.0):
        super().__init__()
        self.embedding_size, self.target_dims = embedding_size, tuple(int(d) for d in target_dims)
        self.temperature, self.weight, self.feature_weight = temperature, weight, feature_weight
        self.base = base_factory(embedding_size)
        self.target_losses = nn.ModuleList(base_factory(d) for d in self.target_dims)

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None, aux=None,
                features=None, **_unused) -> torch.Tensor:
        check_inputs("s2sd", embeddings, labels, embedding_size=self.embedding_size)
        names = [f"s2sd_{j}" for j in range(len(self.target_dims))]
        missing = [n for n in names if not aux or n not in aux]
        if missing:
            raise ValueError(f"s2sd needs the auxiliary embeddings {missing} (build the model with "
                             f"aux_heads=aux_heads_for('s2sd') and pass aux=out['aux'])")
        x = embeddings.float()
        targets, kls = [], []
        for name, dim, target_loss in zip(names, self.target_dims, self.target_losses):
            t = aux[name].float()
            if t.shape[1] != dim:
                raise ValueError(f"s2sd: aux head {name!r} has dimension {t.shape[1]}, expected {dim}")
            targets.append(target_loss(t, labels))
            kls.append(similarity_distillation(x, t, self.temperature))
        # ooDML's criteria/s2sd.py: (source loss + mean target loss) / 2 + w * mean distillation over the targets
        total = (self.base(x, labels, indices_tuple) + torch.stack(targets).mean()) / 2
        total = total + self.weight * torch.stack(kls).mean()
        if self.feature_weight and features is not None:
            f = nn.functional.normalize(features.float(), dim=-1)
            total = total + self.feature_weight * similarity_distillation(x, f, self.temperature)
        return total


def _nearest(dist: torch.Tensor, allowed: torch.Tensor, largest: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the index of the nearest (or farthest) allowed column and whether any column was allowed."""
    fill = float("-inf") if largest else float("inf")
    masked = dist.masked_fill(~allowed, fill)
    idx = masked.argmax(1) if largest else masked.argmin(1)
    return idx, allowed.any(1)


class DiVALoss(nn.Module):
    HEADS = ("shared", "intra", "selfsup")

    @classmethod
    def aux_heads(cls, embedding_size: int = 128, **_options) -> dict[str, tuple[int, str]]:
        """The shared, intra-class and self-supervised heads, each linear to ``embedding_size``."""
        return {name: (embedding_size, "linear") for name in cls.HEADS}

    @property
    def inputs(self) -> tuple[str, ...]:
        """Passed by the training engine; the second view only when the self-supervised head trains."""
        base = ("embeddings", "labels", "aux", "features")
        return (*base, "views") if self.alpha["selfsup"] else base

    def __init__(self, base: nn.Module, embedding_size: int = 128, alpha_shared: float = 0.3,
                 alpha_intra: float = 0.3, alpha_selfsup: float = 0.3, decorrelation: float = 1500.0,
                 margin: float = 0.2, selfsup_temperature: float = 0.1, projector_hidden: int = 512):
        super().__init__()
        self.base, self.embedding_size = base, embedding_size
        self.alpha = {"shared": alpha_shared, "intra": alpha_intra, "selfsup": alpha_selfsup}
        self.decorrelation = decorrelation
        self.triplet = pml_losses.TripletMarginLoss(margin=margin)
        self.ntxent = NTXentLoss(temperature=selfsup_temperature)
        self.projectors = nn.ModuleDict({
            h: nn.Sequential(nn.Linear(embedding_size, projector_hidden), nn.ReLU(inplace=True),
                             nn.Linear(projector_hidden, embedding_size)) for h in self.HEADS})

    @staticmethod
    def shared_triplets(emb: torch.Tensor, labels: torch.Tensor):
        """Anchor, positive = nearest sample of another class, negative = the farthest sample of another class."""
        dist = torch.cdist(emb.detach(), emb.detach())
        other = labels[:, None] != labels[None, :]
        pos, ok = _nearest(dist, other)
        neg, _ = _nearest(dist, other, largest=True)
        ok &= pos != neg
        a = torch.nonzero(ok).squeeze(1)
        return a, pos[a], neg[a]

    @staticmethod
    def intra_triplets(emb: torch.Tensor, labels: torch.Tensor):
        """Anchor, positive = nearest same-class sample, negative = the farthest same-class sample (>= 3 per class)."""
        dist = torch.cdist(emb.detach(), emb.detach())
        n = labels.shape[0]
        same = (labels[:, None] == labels[None, :]) & ~torch.eye(n, dtype=torch.bool, device=labels.device)
        pos, ok = _nearest(dist, same)
        neg, _ = _nearest(dist, same, largest=True)
        ok &= pos != neg
        a = torch.nonzero(ok).squeeze(1)
        return a, pos[a], neg[a]

    def decorrelation_loss(self, main: torch.Tensor, aux: dict[str, torch.Tensor]) -> torch.Tensor:
        total = main.new_zeros(())
        for h in self.HEADS:  # as ooDML's adversarial_separation: auxiliary head -> discriminative embedding
            src = nn.functional.normalize(self.projectors[h](grad_reverse(aux[h])), dim=-1)
            tgt = nn.functional.normalize(grad_reverse(main), dim=-1)
            total = total - (src * tgt).pow(2).mean(-1).mean()
        return total

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None, aux=None, views=None,
                **_unused) -> torch.Tensor:
        check_inputs("diva", embeddings, labels, embedding_size=self.embedding_size)
        missing = [h for h in self.HEADS if not aux or h not in aux]
        if missing:
            raise ValueError(f"diva needs the auxiliary embeddings {missing} (build the model with "
                             "aux_heads=aux_heads_for('diva') and pass aux=out['aux'])")
        x = embeddings.float()
        aux = {h: aux[h].float() for h in self.HEADS}
        total = self.base(x, labels, indices_tuple)
        if self.alpha["shared"]:
            total = total + self.alpha["shared"] * self.triplet(aux["shared"], labels,
                                                                 self.shared_triplets(aux["shared"], labels))
        if self.alpha["intra"]:
            total = total + self.alpha["intra"] * self.triplet(aux["intra"], labels,
                                                               self.intra_triplets(aux["intra"], labels))
        if self.alpha["selfsup"]:
            if views is None:
                raise ValueError("diva's self-supervised head needs views=<selfsup embeddings of a second augmented "
                                 "view of the same images>, or alpha_selfsup=0")
            v = views.float()
            if v.shape != aux["selfsup"].shape:
                raise ValueError(f"diva: views must have shape {tuple(aux['selfsup'].shape)}, got {tuple(v.shape)}")
            ids = torch.arange(x.shape[0], device=x.device)
            total = total + self.alpha["selfsup"] * self.ntxent(torch.cat([aux["selfsup"], v]), torch.cat([ids, ids]))
        if self.decorrelation:
            total = total + self.decorrelation * self.decorrelation_loss(x, aux)
        return total
