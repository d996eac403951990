"""The save | relay | load pipeline with real processes: bytes counted, nothing lost, a cut sink reported,
one producer run feeding several sinks."""

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
    out = _stream.relay([("save", ["head", "-c", str(SIZE), "/dev/zero"]), ("pass", ["cat"])],
                        [("load", ["wc", "-c"])], chunk=1 << 20)
    sent, _seconds, error, output = out["load"]
    assert error == "" and sent == SIZE and output.strip() == str(SIZE)


def test_a_sink_that_stops_reading_is_reported_and_the_producer_stopped(mode, tmp_path):
    # An endless producer: relay returns only if it stops it; its pid file shows it is gone after.
    pid_file = tmp_path / "pid"
    out = _stream.relay([("save", ["sh", "-c", f"echo $$ > {pid_file}; exec cat /dev/zero"])],
                        [("load", ["sh", "-c", "head -c 1000 >/dev/null; exit 3"])])
    sent, _seconds, error, _output = out["load"]
    assert "load exited 3" in error
    assert sent < SIZE * 20
    assert not os.path.exists("/proc/%s" % pid_file.read_text().strip()), "the producer still runs"


def test_a_failing_producer_is_named(mode):
    out = _stream.relay([("save", ["sh", "-c", "echo no such image >&2; exit 125"])], [("load", ["cat"])])
    assert "save exited 125" in out["load"][2] and "no such image" in out["load"][2]


def test_one_producer_run_feeds_every_sink(tmp_path):
    runs = tmp_path / "runs"
    save = ["sh", "-c", f"echo run >> {runs}; head -c {SIZE} /dev/urandom | tee {tmp_path / 'sent'}"]
    sinks = [(f"load on w{i}", ["sh", "-c", f"cat > {tmp_path / f'w{i}'}"]) for i in range(3)]
    out = _stream.relay([("save", save)], sinks)
    assert runs.read_text() == "run\n"  # the image is read once
    for i in range(3):
        sent, _seconds, error, _output = out[f"load on w{i}"]
        assert error == "" and sent == SIZE
        assert (tmp_path / f"w{i}").read_bytes() == (tmp_path / "sent").read_bytes()


def test_a_sink_that_breaks_is_dropped_and_the_others_finish(tmp_path):
    sinks = [("load on good", ["sh", "-c", f"cat > {tmp_path / 'good'}"]),
             ("load on cut", ["sh", "-c", "head -c 1000 >/dev/null; exit 255"])]
    out = _stream.relay([("save", ["head", "-c", str(SIZE), "/dev/zero"])], sinks)
    assert out["load on good"][2] == "" and out["load on good"][0] == SIZE
    assert (tmp_path / "good").stat().st_size == SIZE
    assert "load on cut exited 255" in out["load on cut"][2] and out["load on cut"][0] < SIZE


def test_progress_counts_what_was_read_while_it_streams_and_once_at_the_end(mode):
    seen = []
    out = _stream.relay([("save", ["head", "-c", str(SIZE), "/dev/zero"])], [("load", ["wc", "-c"])],
                        chunk=1 << 20, progress=seen.append, every=0)
    assert out["load"][0] == SIZE
    # every=0: a report after each chunk, growing, and the last one the whole stream.
    assert len(seen) >= 3 and seen == sorted(seen) and seen[-1] == SIZE and seen[0] < SIZE
