"""Offline is the normal case: hub weights that are not cached fail in seconds with the file to pass instead."""
import socket
import threading

import pytest

from umlkit.models.backbones import create_backbone, hub_unreachable


@pytest.fixture()
def silent_server():
    """A local server that accepts connections and never answers (a captive or broken network)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    thread.join()
    for c in held:
        c.close()
    srv.close()


def test_a_hub_that_never_answers_fails_fast_naming_the_file(silent_server, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_ENDPOINT", silent_server)
    monkeypatch.setenv("UMLKIT_HUB_TIMEOUT", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))       # an empty cache
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert "within 1 s" in hub_unreachable()          # the probe's own timeout fired
    with pytest.raises(ConnectionError) as err:       # raised by the probe, before timm's retries start
        create_backbone("vit_s16_in21k_ft_in1k", pretrained=True)
    msg = str(err.value)
    assert "hub is unreachable" in msg and "within 1 s" in msg
    assert "vit_small_patch16_224.augreg_in21k_ft_in1k" in msg and "weights=" in msg and "model.safetensors" in msg


def test_offline_mode_is_detected_without_network(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_unreachable() == "HF_HUB_OFFLINE is set"
    monkeypatch.delenv("HF_HUB_OFFLINE")
    for bad in ("abc", "-1", "nan", "inf", "0"):   # torch/urllib said "Timeout value out of range", "Invalid value NaN"
        monkeypatch.setenv("UMLKIT_HUB_TIMEOUT", bad)
        with pytest.raises(ValueError, match=rf"UMLKIT_HUB_TIMEOUT='{bad}': expected seconds in \(0, 600\]"):
            hub_unreachable()


def test_shipped_and_local_weights_need_no_hub(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")    # nothing listens there
    model = create_backbone("vit_tiny_uml", pretrained=True)   # the shipped file: no request made
    assert model.num_features == 96


def test_corrupt_or_foreign_weights_files_are_named(tmp_path):
    from umlkit.models.backbones import TINY_WEIGHTS
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(TINY_WEIGHTS.read_bytes()[:5000])                     # truncated download
    with pytest.raises(ValueError, match="broken.safetensors cannot be loaded into vit_tiny_uml_patch8_32"):
        create_backbone("vit_tiny_uml", weights=bad)
    with pytest.raises(ValueError, match="cannot be loaded into vit_tiny_uml_patch4_32.*belongs to this backbone") \
            as err:
        create_backbone("vit_tiny_uml_patch4_32", weights=TINY_WEIGHTS)   # another architecture's weights
    # torch's first line names only the class; the mismatching parameter must be in the message
    assert "size mismatch for" in str(err.value) and "Error(s) in loading" not in str(err.value)
    with pytest.raises(FileNotFoundError, match=f"weights file {tmp_path} is a folder"):
        create_backbone("vit_tiny_uml", weights=tmp_path)
