"""Run a module's main() in-process (fixture run_module): arguments in, exit_json/fail_json results out."""
import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    def __init__(self, result, failed=False):
        super().__init__(result)
        self.result = result
        self.failed = failed


@pytest.fixture
def run_module(monkeypatch):
    def _exit(self, **kwargs):
        raise ModuleExit(kwargs)

    def _fail(self, msg, **kwargs):
        raise ModuleExit(dict(kwargs, msg=msg), failed=True)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)

    def _run(main, args):
        with patch_module_args(args):
            with pytest.raises(ModuleExit) as exc:
                main()
        return exc.value
    return _run
