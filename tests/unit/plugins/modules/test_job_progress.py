"""job_progress: whether a background job still runs, how far it is (bytes, rate, share), its log's last line."""
import json
import time

from ansible_collections.dgxspark.vllm.plugins.modules import job_progress


def job(tmp_path, finished):
    async_dir = tmp_path / "async"
    async_dir.mkdir(exist_ok=True)
    data = {"started": 1, "finished": 0, "ansible_job_id": "j1"} if not finished else {"rc": 0, "changed": True}
    (async_dir / "j1").write_text(json.dumps(data))
    return async_dir


def test_a_running_job_reports_bytes_rate_share_the_last_line_and_how_to_follow(run_module, tmp_path):
    async_dir = job(tmp_path, finished=False)
    folder = tmp_path / "download"
    folder.mkdir()
    (folder / "a").write_bytes(b"x" * 1024)
    log = tmp_path / "build.log"
    log.write_text("Step 1/3\n\nStep 2/3 : RUN make\n")
    args = {"jid": "j1", "async_dir": str(async_dir), "watch": str(folder), "total": 4096, "log": str(log),
            "what": "model copy", "follow": "tail -f build.log"}
    first = run_module(job_progress.main, args)
    assert not first["failed"] and first["finished"] is False and first["bytes"] == 1024 and first["rate"] is None
    assert first["progress"].startswith("model copy: 1.0 KiB so far (25%)")
    assert "last: Step 2/3 : RUN make" in first["progress"] and first["progress"].endswith("follow: tail -f build.log")
    time.sleep(0.2)
    (folder / "b").write_bytes(b"y" * 2048)
    second = run_module(job_progress.main, args)
    assert second["bytes"] == 3072 and second["rate"] > 0 and "(75%)" in second["progress"] and "/s" in second["progress"]


def test_a_finished_job_says_done_and_forgets_its_mark(run_module, tmp_path):
    async_dir = job(tmp_path, finished=False)
    log = tmp_path / "log"
    log.write_text("x\n")
    run_module(job_progress.main, {"jid": "j1", "async_dir": str(async_dir), "watch": str(log)})
    assert (async_dir / ".j1.progress").exists()
    job(tmp_path, finished=True)
    out = run_module(job_progress.main, {"jid": "j1", "async_dir": str(async_dir), "watch": str(log), "what": "build"})
    assert out["finished"] is True and out["progress"].startswith("build: done") and "follow" not in out["progress"]
    assert not (async_dir / ".j1.progress").exists()


def test_a_job_whose_status_is_gone_counts_as_finished(run_module, tmp_path):
    out = run_module(job_progress.main, {"jid": "nope", "async_dir": str(tmp_path)})
    assert out["finished"] is True and out["bytes"] is None and out["changed"] is False


def test_a_job_that_keeps_its_own_count_is_read_from_its_counter(run_module, tmp_path):
    # A stream to another node: no path here grows, the job writes its count (image_distribute's progress_file).
    from ansible_collections.dgxspark.vllm.plugins.module_utils._progress import write_counter
    async_dir = job(tmp_path, finished=False)
    counter = tmp_path / "stream.progress"
    args = {"jid": "j1", "async_dir": str(async_dir), "counter": str(counter), "what": "image stream"}
    before = run_module(job_progress.main, args)
    assert before["bytes"] is None and before["progress"].startswith("image stream:")
    write_counter(str(counter), 1 << 30, 4 << 30)
    first = run_module(job_progress.main, args)
    assert first["bytes"] == 1 << 30 and first["progress"].startswith("image stream: 1.0 GiB so far (25%)")
    time.sleep(0.2)
    write_counter(str(counter), 2 << 30, 4 << 30)
    second = run_module(job_progress.main, dict(args, total=8 << 30))
    assert second["bytes"] == 2 << 30 and second["rate"] > 0 and "(25%)" in second["progress"]


def test_watch_and_counter_do_not_go_together(run_module, tmp_path):
    out = run_module(job_progress.main, {"jid": "j1", "async_dir": str(tmp_path), "watch": str(tmp_path),
                                         "counter": str(tmp_path / "c")})
    assert out["failed"] and "mutually exclusive" in out["msg"]


def test_wait_answers_as_soon_as_the_job_ends_and_no_later_than_wait(run_module, tmp_path):
    import threading
    async_dir = job(tmp_path, finished=False)
    threading.Timer(0.3, job, (tmp_path, True)).start()
    t0 = time.monotonic()
    out = run_module(job_progress.main, {"jid": "j1", "async_dir": str(async_dir), "wait": 20})
    assert out["finished"] is True and time.monotonic() - t0 < 10
    job(tmp_path, finished=False)
    t0 = time.monotonic()
    out = run_module(job_progress.main, {"jid": "j1", "async_dir": str(async_dir), "wait": 1})
    assert out["finished"] is False and time.monotonic() - t0 >= 1
