"""Brute-force reference implementations (plain Python loops) that the vectorised engine is tested against."""
import numpy as np


def ranked_neighbours(q, g, self_ids=None):
    """For each query, gallery positions sorted by cosine similarity desc, ties by index; self removed."""
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    gn = g / np.linalg.norm(g, axis=1, keepdims=True)
    out = []
    for i in range(len(qn)):
        sims = [(float(np.dot(qn[i].astype(np.float64), gn[j].astype(np.float64))), j) for j in range(len(gn))]
        sims = [(s, j) for s, j in sims if self_ids is None or j != self_ids[i]]
        sims.sort(key=lambda t: (-t[0], t[1]))
        out.append([j for _, j in sims])
    return out


def brute_metrics(q, ql, g=None, gl=None, ks=(1, 2, 4, 8), convention="musgrave"):
    self_mode = g is None
    if self_mode:
        g, gl = q, ql
    neigh = ranked_neighbours(q, g, list(range(len(q))) if self_mode else None)
    res = {f"R@{k}": [] for k in ks}
    maps, rps, m1000 = [], [], []
    for i, order in enumerate(neigh):
        rel = [int(gl[j] == ql[i]) for j in order]
        for k in ks:
            res[f"R@{k}"].append(1.0 if any(rel[:k]) else 0.0)
        count = sum(1 for lab in gl if lab == ql[i])  # includes self in self mode
        r = count - (1 if self_mode else 0)
        if r > 0:
            depth = r if convention == "musgrave" else min(count, len(order))
            denom = r if convention == "musgrave" else count
            hits, ap = 0, 0.0
            for pos in range(depth):
                if rel[pos]:
                    hits += 1
                    ap += hits / (pos + 1)
            maps.append(ap / denom)
            rps.append(sum(rel[:depth]) / denom)
        if count > 0:
            hits, ap = 0, 0.0
            for pos in range(min(1000, len(order))):
                if rel[pos]:
                    hits += 1
                    ap += hits / (pos + 1)
            m1000.append(ap / count)
    out = {key: float(np.mean(v)) for key, v in res.items()}
    out["MAP@R"] = float(np.mean(maps))
    out["RP"] = float(np.mean(rps))
    out["mAP@1000"] = float(np.mean(m1000))
    out["n_without_positives"] = float(len(q) - len(maps))
    return out
