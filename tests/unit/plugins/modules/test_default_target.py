"""default_target: set-default and isolate only when needed; check mode and diff tell the truth."""
import pytest

from ansible.module_utils import basic
from ansible_collections.dgxspark.vllm.plugins.modules import default_target


class FakeSystemd:
    """systemctl with a default target and a set of active units; records what ran.

    An isolate keeps the target, the services it wants (WANTS) and those that ignore isolate (IGNORING)."""

    WANTS = {"multi-user.target": ["sshd.service", "dgxspark-vllm.service"]}
    IGNORING = {"systemd-journald.service"}

    def __init__(self, default, active):
        self.default = default
        self.active = set(active)
        self.calls = []

    def run_command(self, module, args, **kwargs):
        verb = args[1:]
        self.calls.append(verb)
        if verb == ["get-default"]:
            return 0, self.default + "\n", ""
        if verb[0] == "is-active":
            state = "active" if verb[1] in self.active else "inactive"
            return (0 if state == "active" else 3), state + "\n", ""
        if verb[0] == "set-default":
            self.default = verb[1]
            return 0, "", ""
        if verb[0] == "isolate":
            kept = set(self.WANTS.get(verb[1], [])) | self.IGNORING
            self.active = {verb[1]} | (self.active & kept)
            return 0, "", ""
        if verb[0] == "list-units":
            return 0, "".join(f"{u} loaded active running x\n" for u in sorted(self.active) if u.endswith(".service")), ""
        if verb[0] == "list-dependencies":
            return 0, verb[-1] + "\n" + "".join(f"  \u25cf {u}\n" for u in self.WANTS.get(verb[-1], [])), ""
        if verb[0] == "show":
            return 0, "\n\n".join(f"Id={u}\nIgnoreOnIsolate={'yes' if u in self.IGNORING else 'no'}"
                                    for u in verb[2:]) + "\n", ""
        raise AssertionError(f"unexpected systemctl {verb}")

    def writes(self):
        return [c for c in self.calls if c[0] in ("set-default", "isolate")]


@pytest.fixture
def systemd(monkeypatch):
    def make(default, active):
        fake = FakeSystemd(default, active)
        monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kw: fake.run_command(self, args, **kw))
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/bin/" + name)
        return fake
    return make


DESKTOP = ["graphical.target", "multi-user.target", "display-manager.service"]
# A desktop node that also runs a server started by hand, sshd, the engine and the journal.
BUSY = DESKTOP + ["fleet-server.service", "sshd.service", "dgxspark-vllm.service", "systemd-journald.service"]


def test_desktop_node_is_switched(run_module, systemd):
    fake = systemd("graphical.target", DESKTOP)
    result = run_module(default_target.main, {"target": "multi-user.target", "isolate": True})
    assert result["changed"] and result["isolated"]
    assert result["default_before"] == "graphical.target"
    assert fake.writes() == [["set-default", "multi-user.target"], ["isolate", "multi-user.target"]]


def test_second_run_changes_nothing(run_module, systemd):
    fake = systemd("multi-user.target", ["multi-user.target"])
    result = run_module(default_target.main, {"target": "multi-user.target", "isolate": True})
    assert not result["changed"] and not result["isolated"]
    assert fake.writes() == []


def test_check_mode_reports_without_writing(run_module, systemd):
    fake = systemd("graphical.target", DESKTOP)
    result = run_module(default_target.main, {"target": "multi-user.target", "isolate": True,
                                              "_ansible_check_mode": True, "_ansible_diff": True})
    assert result["changed"] and result["isolated"]
    assert fake.writes() == []
    assert "default: graphical.target" in result["diff"]["before"]
    assert "default: multi-user.target" in result["diff"]["after"]
    assert "graphical.target: active" in result["diff"]["before"]
    assert "graphical.target: inactive" in result["diff"]["after"]


def test_default_only_leaves_the_desktop_running(run_module, systemd):
    fake = systemd("graphical.target", DESKTOP)
    result = run_module(default_target.main, {"target": "multi-user.target", "isolate": False})
    assert result["changed"] and not result["isolated"]
    assert fake.writes() == [["set-default", "multi-user.target"]]


def test_isolates_when_default_set_but_desktop_still_up(run_module, systemd):
    fake = systemd("multi-user.target", DESKTOP)
    result = run_module(default_target.main, {"target": "multi-user.target", "isolate": True})
    assert result["changed"] and result["isolated"]
    assert fake.writes() == [["isolate", "multi-user.target"]]


def test_rejects_a_non_target(run_module, systemd):
    systemd("graphical.target", DESKTOP)
    exc = run_module(default_target.main, {"target": "gdm.service"})
    assert exc["failed"] and "NAME.target" in exc["msg"]


def test_the_switch_names_the_services_it_stopped(run_module, systemd):
    fake = systemd("graphical.target", BUSY)
    result = run_module(default_target.main, {"target": "multi-user.target", "isolate": True})
    assert result["stopped_units"] == ["display-manager.service", "fleet-server.service"]
    assert "fleet-server.service" not in fake.active and "sshd.service" in fake.active


def test_check_mode_names_the_services_the_switch_would_stop(run_module, systemd):
    fake = systemd("graphical.target", BUSY)
    result = run_module(default_target.main, {"target": "multi-user.target", "isolate": True,
                                              "_ansible_check_mode": True, "_ansible_diff": True})
    assert result["stopped_units"] == ["display-manager.service", "fleet-server.service"]
    assert "stopped: fleet-server.service" in result["diff"]["after"]
    assert fake.writes() == [] and "fleet-server.service" in fake.active


def test_no_switch_stops_nothing(run_module, systemd):
    systemd("multi-user.target", ["multi-user.target", "fleet-server.service"])
    result = run_module(default_target.main, {"target": "multi-user.target", "isolate": True})
    assert result["stopped_units"] == [] and not result["isolated"]
