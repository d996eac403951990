"""The simulated pair after site.yml: reachable nodes, systemd, nested containers."""

import os

import pytest
import testinfra

# Molecule's inventory directory holds the scenario's hosts and the sim group_vars.
INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
NODES = ["spark-head", "spark-worker-1"]
# The engine image the converge put on every node (no second image loaded for one container run).
ENGINE_IMAGE = "localhost/dgxspark-sim-vllm:latest"


def node(name):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)


@pytest.mark.parametrize("name", NODES)
def test_systemd_runs_and_node_answers_as_itself(name):
    host = node(name)
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), state
    assert host.check_output("hostname") == name


@pytest.mark.parametrize("name", NODES)
def test_nested_docker_run(name):
    host = node(name)
    out = host.run(f"sudo docker run --rm --network host --entrypoint python3 {ENGINE_IMAGE} "
                   "-c 'import ray; print(\"nested ok\", ray.__version__)'")
    assert out.rc == 0, out.stderr
    assert out.stdout.startswith("nested ok 2."), out.stdout
