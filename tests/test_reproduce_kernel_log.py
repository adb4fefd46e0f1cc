"""``umlkit reproduce`` keeps the kernel process's own output (its ZMQ traceback after Ctrl-C, its start-up warnings)
off the terminal: a process started inside ``kernel_stderr_to`` writes to the chapter's log, while umlkit's own
``sys.stderr`` (papermill's progress bar, the summary) still reaches the terminal, and everything is restored."""
import subprocess
import sys

from umlkit.reproduce import kernel_stderr_to


def test_a_child_process_writes_to_the_log_and_this_process_to_the_terminal(tmp_path, capfd):
    log = tmp_path / "intro.kernel.log"
    child = [sys.executable, "-c", "import sys; sys.stderr.write('zmq.error.ZMQError: Socket operation on non-socket')"]
    with kernel_stderr_to(log):
        subprocess.run(child, check=True)
        print("Executing: 46%", file=sys.stderr)
    subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('after')"], check=True)
    err = capfd.readouterr().err
    assert log.read_text() == "zmq.error.ZMQError: Socket operation on non-socket"
    assert "Executing: 46%" in err and "after" in err and "ZMQError" not in err
    with kernel_stderr_to(log):        # appended, not replaced: a second chapter's kernel keeps the first one's lines
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write(' again')"], check=True)
    assert log.read_text().endswith(" again") and log.read_text().startswith("zmq")


def test_a_stderr_that_is_not_file_descriptor_2_is_left_alone(tmp_path, capsys):
    """Under pytest's capsys (or inside Jupyter) sys.stderr is not fd 2: it keeps its object, and what this process
    prints still lands there."""
    before = sys.stderr
    with kernel_stderr_to(tmp_path / "x.kernel.log"):
        assert sys.stderr is before
        print("progress", file=sys.stderr)
    assert sys.stderr is before and "progress" in capsys.readouterr().err


def test_a_failing_chapter_is_summarised_by_its_cell_and_its_own_exception():
    """Issue 83: papermill's message starts with an empty line; the summary shows the cell and what it raised."""
    from papermill.exceptions import PapermillExecutionError

    from umlkit.reproduce import _failure
    err = PapermillExecutionError(cell_index=7, exec_count=5, source="T['Table 2']", ename="KeyError",
                                  evalue="'metric'", traceback=[])
    assert str(err).splitlines()[0] == "" and _failure(err) == "cell 5: KeyError: 'metric'"
    assert _failure(ValueError("\nthe second line says it")) == "ValueError: the second line says it"
