"""Every phase of site.yml alone (`--tags PHASE`), on the pair site.yml just converged: each one runs by
itself (no fact or variable of an earlier phase needed) and finds nothing to change."""
import re

import pytest
import yaml

import serving_checks as sc

HOSTS = sc.inventory()
# The phases in site.yml's order, read from the playbook itself: a phase added there is tested here.
# A tag several plays share (the deployment lock's hold and release go with Ray, serve and validate) is one phase.
PHASES = list(dict.fromkeys(t for play in yaml.safe_load((sc.PROJECT / "playbooks" / "site.yml").read_text())
                            for t in play.get("tags", []) if t != "always"))


def changed(out):
    """changed= of every host in the PLAY RECAP (a host no play of this phase ran on is not there)."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s*:\s*ok=\d+\s+changed=(\d+)", out, re.M)}


def test_site_yml_has_its_phases():
    assert len(PHASES) >= 13 and PHASES[0] == "preflight" and PHASES[-1] == "watchdog", PHASES


@pytest.mark.parametrize("phase", PHASES)
def test_each_phase_alone_runs_and_changes_nothing_on_a_converged_pair(phase):
    res = sc.playbook("site.yml", "--tags", phase, timeout=900)
    assert res.returncode == 0, f"site.yml --tags {phase} failed:\n{res.stdout[-4000:]}"
    counts = changed(res.stdout)
    assert counts and set(counts) <= set(HOSTS), res.stdout[-4000:]
    assert not any(counts.values()), f"site.yml --tags {phase} changed {counts} on a converged pair:\n{res.stdout[-4000:]}"
    if phase == "serve":
        # The finish line: the endpoint at the address clients use, a first request, and no key in the log.
        finish = sc.flat(res.stdout[res.stdout.index("Finish line"):])
        host = next(hv for hv in HOSTS.values() if hv["group"] == "spark_head")["common_api_host"]
        assert f"Endpoint: http://{host}:8000/v1 (OpenAI API), models: minimax-m3" in finish, finish
        assert f"curl http://{host}:8000/v1/chat/completions" in finish and "$API_KEY" in finish, finish
        key = next(iter(HOSTS.values()))["serve_api_key"]
        assert key not in finish, "the API key is in the run's output"
