"""The same suite on any CPU (issue 74): one test per kernel rule runs again with torch's and oneDNN's kernels
limited to AVX2 (``ATEN_CPU_CAPABILITY=avx2``, ``ONEDNN_MAX_CPU_ISA=AVX2``), as on an AVX2-only laptop or cluster
node. On an AVX-512 host this is the limited run beside the native one of the rest of ``make test``; on an AVX2 host
both runs take the same kernels. The rules' tests set the CPU's flags themselves (marker ``kernel_rule``), so their
outcome may not depend on the host either way: which kernel a search takes by CPU and ISA limit, fp32 below the
representative size, mAP@1000's streamed pass only where bf16 is native, the search's thread count, and what
``umlkit evaluate --explain`` says."""
import os
import subprocess
import sys

ONE_PER_RULE = [
    "tests/metrics/test_kernels.py::test_a_kernel_the_cpu_or_onednn_lacks_is_never_timed",
    "tests/metrics/test_kernels.py::test_a_search_smaller_than_the_representative_one_runs_fp32_without_measuring",
    "tests/metrics/test_deep_ap.py::test_the_streamed_pass_runs_only_where_bf16_is_native_or_pinned",
    "tests/metrics/test_deep_ap.py::test_the_search_behind_map1000_runs_on_every_configured_thread",
    "tests/test_cli.py::test_cli_evaluate_explain_says_which_kernel_and_why_on_stderr",
]
_CHECK = "import torch; print(torch.backends.cpu.get_cpu_capability())"


def test_the_kernel_rules_hold_with_torch_and_onednn_limited_to_avx2(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "OMP_NUM_THREADS": "1",
           "UMLKIT_CACHE": str(tmp_path / "cache")}
    env.pop("PYTEST_XDIST_WORKER", None)
    capability = subprocess.run([sys.executable, "-c", _CHECK], env=env, capture_output=True, text=True, check=True)
    assert capability.stdout.strip() in ("AVX2", "DEFAULT"), capability.stdout   # the limit took effect
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           *ONE_PER_RULE], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "10 passed" in done.stdout, done.stdout[-1500:]   # 5 tests, two parametrised (5 and 2 cases)
