"""Make `ansible_collections.dgxspark.vllm` importable from the working tree, and the one way the unit
tests run a module: `run_module(main, args)` runs its main() in this process and returns its result."""
import pathlib
import sys
from unittest import mock

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / ".collections"
if not (COLLECTIONS / "ansible_collections" / "dgxspark" / "vllm").exists():
    raise RuntimeError("run scripts/bootstrap.sh first: it links the collection under .collections/")
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))

from ansible.module_utils import basic  # noqa: E402  pylint: disable=wrong-import-position
from ansible.module_utils.testing import patch_module_args  # noqa: E402  pylint: disable=wrong-import-position


class _Exited(Exception):
    def __init__(self, result):
        super().__init__(result.get("msg"))
        self.result = result


# The result: exit_json's or fail_json's keyword arguments, with "failed" always set.
def _exit_json(_module, **result):
    raise _Exited(dict({"failed": False}, **result))


def _fail_json(_module, msg, **result):
    raise _Exited(dict(result, msg=msg, failed=True))


def call_module(main, args, check_mode=False, diff=False):
    """Run a module's main() with these arguments; its exit_json / fail_json end the call with the result.
    Arguments named `_ansible_check_mode` / `_ansible_diff` in `args` win over check_mode / diff."""
    args = dict({"_ansible_check_mode": check_mode, "_ansible_diff": diff}, **args)
    with mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json), patch_module_args(args):
        try:
            main()
        except _Exited as exc:
            return exc.result
    raise AssertionError("%s returned without exit_json or fail_json" % getattr(main, "__module__", main))


@pytest.fixture(name="run_module")
def fixture_run_module():
    return call_module


TRITON_FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "triton-cache-h200-triton3.6.tgz"


@pytest.fixture(name="triton_home")
def fixture_triton_home(tmp_path):
    """The real Triton cache (captured on an H200) as ~/.triton holds it: <returned folder>/cache/<hash>/..."""
    import tarfile  # pylint: disable=import-outside-toplevel
    with tarfile.open(TRITON_FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    root = tmp_path / "triton-home"
    root.mkdir()
    (tmp_path / "tc").rename(root / "cache")
    return root


def _make_model(cache, model="Org/Tiny", files=None, rev="abc123"):
    """A hub-cache model the way huggingface_hub lays it out: blobs, and snapshot links to them."""
    import hashlib  # pylint: disable=import-outside-toplevel
    import os  # pylint: disable=import-outside-toplevel
    path = os.path.join(str(cache), "models--" + model.replace("/", "--"))
    files = files or {"config.json": b'{"a": 1}', "model.safetensors": b"\x00" * 1000}
    os.makedirs(os.path.join(path, "refs"))
    with open(os.path.join(path, "refs", "main"), "w") as handle:
        handle.write(rev)
    snap = os.path.join(path, "snapshots", rev)
    os.makedirs(snap)
    os.makedirs(os.path.join(path, "blobs"))
    for name, data in files.items():
        blob = hashlib.sha256(data).hexdigest()
        with open(os.path.join(path, "blobs", blob), "wb") as handle:
            handle.write(data)
        os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snap, name))
    return path


@pytest.fixture(name="make_model")
def fixture_make_model():
    return _make_model
