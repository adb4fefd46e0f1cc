"""umlkit._env: bad environment variables are refused at import, each named with its value and what it accepts."""
import os
import subprocess
import sys

import pytest

from umlkit._env import VARIABLES, EnvironmentProblem, check_environment


def test_every_bad_variable_is_named_at_once(tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    env = {"UMLKIT_SEARCH_THREADS": "-3", "UMLKIT_SEARCH_DTYPE": "fp16", "UMLKIT_RESULTS": str(a_file),
           "UMLKIT_PAPERS": str(tmp_path / "nowhere"), "UMLKIT_HUB_TIMEOUT": "0"}
    with pytest.raises(EnvironmentProblem) as err:
        check_environment(env, cores=4)
    msg = str(err.value)
    for name, value in env.items():
        assert f"{name}={value!r}: expected {VARIABLES[name][1]}" in msg
    assert env["UMLKIT_SEARCH_THREADS"] == "-3"   # nothing was changed on the way to the refusal


def test_threads_above_the_cores_are_clamped_with_a_note_and_good_values_pass(tmp_path):
    env = {"UMLKIT_SEARCH_THREADS": "4096", "UMLKIT_PROGRESS": "Off", "UMLKIT_DATA": str(tmp_path / "later"),
           "UMLKIT_PAPERS": f"{tmp_path}{os.pathsep}{tmp_path}", "UMLKIT_SEARCH_DTYPE": ""}
    notes = check_environment(env, cores=3)
    assert env["UMLKIT_SEARCH_THREADS"] == "3" and notes == [
        "UMLKIT_SEARCH_THREADS=4096 is more than the 3 core(s) this process may use; searching on 3"]
    assert check_environment({"UMLKIT_SEARCH_THREADS": "2"}, cores=3) == []


def test_the_command_refuses_at_start_up_and_a_script_gets_the_exception():
    env = {**os.environ, "UMLKIT_SEARCH_DTYPE": "fp16"}
    cli = subprocess.run([os.path.join(os.path.dirname(sys.executable), "umlkit"), "--version"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and "UMLKIT_SEARCH_DTYPE='fp16': expected 'bf16', 'fp32' or 'int8'" in cli.stderr
    assert "Traceback" not in cli.stderr
    script = subprocess.run([sys.executable, "-c", "import umlkit"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert script.returncode == 1 and "EnvironmentProblem" in script.stderr
    clamp = subprocess.run([sys.executable, "-c", "import os, umlkit; print(os.environ['UMLKIT_SEARCH_THREADS'])"],
                           env={**os.environ, "UMLKIT_SEARCH_THREADS": "4096"}, capture_output=True, text=True,
                           timeout=120)
    assert clamp.stdout.strip() == str(len(os.sched_getaffinity(0))) and "more than the" in clamp.stderr
