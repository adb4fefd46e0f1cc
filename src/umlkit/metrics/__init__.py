"""umlkit.metrics: the one retrieval-evaluation engine all chapters use, plus distribution and structure metrics."""
from umlkit.metrics.distribution import (
    aggregated_generalization_score,
    class_mean_frechet_distance,
    class_means,
    frechet_distance,
)
from umlkit.metrics.knn import knn_search
from umlkit.metrics.probes import attribute_probes, linear_probe
from umlkit.metrics.retrieval import (
    DEFAULT_KS,
    evaluate_retrieval,
    map_at_1000,
    map_at_r,
    neighbour_class_counts,
    nmi,
    r_precision,
    recall_at_k,
)
from umlkit.metrics.structure import embedding_structure, spectral_decay
from umlkit.metrics.unified import cross_source_rate, harmonic_mean, unified_evaluation

__all__ = [
    "DEFAULT_KS",
    "aggregated_generalization_score",
    "attribute_probes",
    "class_mean_frechet_distance",
    "class_means",
    "embedding_structure",
    "evaluate_retrieval",
    "frechet_distance",
    "harmonic_mean",
    "linear_probe",
    "knn_search",
    "map_at_1000",
    "map_at_r",
    "neighbour_class_counts",
    "nmi",
    "r_precision",
    "recall_at_k",
    "spectral_decay",
    "unified_evaluation",
    "cross_source_rate",
]
