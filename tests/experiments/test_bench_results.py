"""The evaluation chapter's example data: the benchmark at several sizes."""
import json

import pytest


def test_speed_by_size_reads_the_benchmark_at_several_sizes(tmp_path):
    """bench_eval.py --scales ... --json: seconds per size and implementation, speed-up = PML / umlkit; a file
    without one of the two implementations is named; no file gives an empty frame."""
    from umlkit.experiments.pages.bench_results import speed_by_size
    runs = [{"scale": s, "items": n, "impl": i, "seconds": t, "peak_rss_mb": 1.0, "search": None}
            for s, n, i, t in ((0.1, 100, "pml", 2.0), (0.1, 100, "umlkit", 4.0), (1, 1000, "umlkit", 5.0),
                               (1, 1000, "pml", 20.0))]
    path = tmp_path / "sizes.json"
    path.write_text(json.dumps({"machine": "CPU: test", "date": "2026-11-28", "results": runs}))
    frame, machine = speed_by_size(path)
    assert frame.index.tolist() == [100, 1000] and frame["speed-up"].tolist() == [0.5, 4.0]
    assert machine == "CPU: test, 2026-11-28"
    path.write_text(json.dumps({"results": [r for r in runs if r["impl"] == "pml"]}))
    with pytest.raises(ValueError, match="sizes.json: expected runs of both 'pml' and 'umlkit'"):
        speed_by_size(path)
    assert speed_by_size(tmp_path / "none.json")[0].empty


def test_speed_view_shows_points_with_two_decimals_and_the_largest_difference():
    import pandas as pd

    from umlkit.experiments.pages.bench_results import speed_view
    speed = pd.DataFrame({"R@1": [0.913812, 0.913812], "MAP@R": [0.641234, 0.641236], "RP": [0.68, 0.68],
                          "seconds": [0.0912, 0.04], "speed-up vs PML": [0.4386, 1.0]},
                         index=["umlkit (fp32 search)", "PML AccuracyCalculator"])
    view = speed_view(speed)
    assert view["R@1"].tolist() == [91.38, 91.38] and view["seconds"].tolist() == [0.09, 0.04]
    assert view.iloc[:, -1].tolist() == ["0.0e+00", "2.0e-04"]   # |0.641236 - 0.641234| x 100
