"""AnsibleModule's exit_json/fail_json turned into an exception a test can catch."""
import pytest


class Exit(Exception):
    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result, self.failed = result, failed


@pytest.fixture(autouse=True)
def no_exit(monkeypatch):
    def exit_json(self, **kw):
        raise Exit(kw, False)

    def fail_json(self, **kw):
        raise Exit(kw, True)
    from ansible.module_utils.basic import AnsibleModule
    monkeypatch.setattr(AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(AnsibleModule, "fail_json", fail_json)
