"""The save | relay | load pipeline with real processes: bytes counted, nothing lost, a cut sink reported."""

import os

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _stream

SIZE = 5 * (1 << 20) + 123  # several chunks and a ragged end


@pytest.fixture(params=["splice", "copy"])
def mode(request, monkeypatch):
    if request.param == "copy":
        monkeypatch.delattr(_stream.os, "splice", raising=False)
    elif not hasattr(os, "splice"):
        pytest.skip("os.splice needs Linux and Python 3.10+")
    return request.param


def test_every_byte_arrives_and_is_counted(mode):
    sent, _seconds, error, output = _stream.relay(
        [("save", ["head", "-c", str(SIZE), "/dev/zero"]), ("pass", ["cat"])], "load", ["wc", "-c"], chunk=1 << 20)
    assert error == "" and sent == SIZE and output.strip() == str(SIZE)


def test_a_sink_that_stops_reading_is_reported_and_the_producer_stopped(mode):
    sent, _seconds, error, _output = _stream.relay(
        [("save", ["head", "-c", str(SIZE * 20), "/dev/zero"])], "load", ["sh", "-c", "head -c 1000 >/dev/null; exit 3"])
    assert sent < SIZE * 20
    assert "load exited 3" in error


def test_a_failing_producer_is_named(mode):
    _sent, _seconds, error, _output = _stream.relay(
        [("save", ["sh", "-c", "echo no such image >&2; exit 125"])], "load", ["cat"])
    assert "save exited 125" in error and "no such image" in error
