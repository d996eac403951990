"""task_timer: a retrying task's progress line is printed, a retry without one adds nothing."""
from types import SimpleNamespace
from unittest import mock

from ansible_collections.dgxspark.vllm.plugins.callback import task_timer


def retry(result):
    return SimpleNamespace(_result=result, _host=SimpleNamespace(get_name=lambda: "spark-head"))


def test_a_retry_with_a_progress_line_prints_it_with_the_host():
    cb = task_timer.CallbackModule()
    cb._display = mock.Mock()  # pylint: disable=protected-access
    cb.v2_runner_retry(retry({"progress": "stream of img to spark-worker-1: 1.0 GiB so far (40%), 90.0 MiB/s"}))
    cb._display.display.assert_called_once()  # pylint: disable=protected-access
    line = cb._display.display.call_args[0][0]  # pylint: disable=protected-access
    assert line == "  [spark-head] stream of img to spark-worker-1: 1.0 GiB so far (40%), 90.0 MiB/s"


def test_a_retry_without_one_prints_nothing():
    cb = task_timer.CallbackModule()
    cb._display = mock.Mock()  # pylint: disable=protected-access
    cb.v2_runner_retry(retry({"finished": False}))
    cb._display.display.assert_not_called()  # pylint: disable=protected-access
