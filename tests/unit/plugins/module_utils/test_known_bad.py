"""The known-bad table (roles/preflight/files/known_bad.yml) and its matcher."""
import pathlib

import pytest
import yaml

from ansible_collections.dgxspark.vllm.plugins.module_utils._known_bad import (
    KnownBadError, check_table, evaluate, matches, numbers)
from ansible_collections.dgxspark.vllm.plugins.module_utils._node_info import kho_state, toolkit_mode

TABLE = yaml.safe_load((pathlib.Path(__file__).resolve().parents[4] / "roles" / "preflight" / "files"
                        / "known_bad.yml").read_text())
# A healthy DGX OS node as the threads describe one (kernel 6.17.0-1032, legacy toolkit, the system NCCL).
HEALTHY = {"kernel": "6.17.0-1032-nvidia", "kho": "on", "container_toolkit": "1.19.0", "container_toolkit_mode": "legacy",
           "nccl_version": "2.30.7", "nccl_file": "/usr/lib/aarch64-linux-gnu/libnccl.so.2", "rail_pcie_width": "4"}


def hit_ids(facts, accepted=()):
    return [h["id"] for h in evaluate(TABLE, facts, accepted)["hits"]]


@pytest.mark.parametrize("spec,value,expected", [
    ("7.0.0-1019", "7.0.0-1019-nvidia", True),
    ("7.0.0-1019", "7.0.0-1019-nvidia-64k", True),
    ("7.0.0-1019", "7.0.0-1020-nvidia", False),
    ("7.0.0-1019", "7.0.0-10190-nvidia", False),
    ("<2.30.4", "2.28.9", True),
    ("<2.30.4", "2.30.4", False),
    (">=1.19.1,<1.20", "1.19.1-1", True),
    (">=1.19.1,<1.20", "1.20.0", False),
    ("<4", "2", True),
    ("<4", "4", False),
    ("glob:*/nvidia/nccl/lib/*", "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2", True),
    ("glob:*/nvidia/nccl/lib/*", "/usr/lib/aarch64-linux-gnu/libnccl.so.2", False),
    ("cdi", "cdi", True),
    ("cdi", "legacy", False),
])
def test_specs(spec, value, expected):
    assert matches(spec, value) is expected


def test_numbers_are_the_numbered_parts():
    assert numbers("7.0.0-1019-nvidia-64k") == (7, 0, 0, 1019, 64)
    assert numbers("2.28.9+cuda13.0") == (2, 28, 9, 13, 0)


def test_the_shipped_table_is_well_formed_and_sourced():
    rows = check_table(TABLE)
    assert len({r["id"] for r in rows}) == len(rows)
    assert all(r["source"].startswith("https://") for r in rows)


def test_a_healthy_node_matches_no_row():
    assert hit_ids(HEALTHY) == []


@pytest.mark.parametrize("change,expected", [
    ({"kernel": "7.0.0-1019-nvidia"}, ["kernel-7.0.0-1019-kho"]),
    ({"container_toolkit": "1.19.1-1", "container_toolkit_mode": "cdi"}, ["container-toolkit-1.19.1-cdi"]),
    ({"nccl_version": "2.28.9", "nccl_file": "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"},
     ["nccl-2.28.9-pip-wheel", "nccl-2.28.9-graph-replay"]),
    ({"nccl_version": "2.28.9", "nccl_file": "/usr/lib/aarch64-linux-gnu/libnccl.so.2"}, ["nccl-2.28.9-graph-replay"]),
    ({"rail_pcie_width": "2"}, ["second-rail-pcie-x2"]),
])
def test_each_row_matches_the_node_its_thread_describes(change, expected):
    assert hit_ids(dict(HEALTHY, **change)) == expected


def test_the_kernel_row_needs_kexec_handover_on():
    # kho=off on the kernel command line is the fix NVIDIA ships for 7.0.0-1019.
    assert hit_ids(dict(HEALTHY, kernel="7.0.0-1019-nvidia", kho="off")) == []


def test_the_toolkit_row_needs_the_cdi_mode():
    assert hit_ids(dict(HEALTHY, container_toolkit="1.19.1-1", container_toolkit_mode="legacy")) == []


def test_a_fact_not_read_matches_nothing_and_is_named_unknown():
    facts = dict(HEALTHY, nccl_version=None, nccl_file=None)
    result = evaluate(TABLE, facts)
    assert result["hits"] == []
    assert result["unknown"]["nccl-2.28.9-pip-wheel"] == ["nccl_version", "nccl_file"]


def test_an_accepted_row_still_hits_marked_accepted():
    hits = evaluate(TABLE, dict(HEALTHY, kernel="7.0.0-1019-nvidia"), accepted=["kernel-7.0.0-1019-kho"])["hits"]
    assert [(h["id"], h["accepted"]) for h in hits] == [("kernel-7.0.0-1019-kho", True)]
    assert "kho=off" in hits[0]["fix"] and hits[0]["source"].endswith("/issues/392")


@pytest.mark.parametrize("table,message", [
    ({"id": "x"}, "must be a list of rows"),
    (["x"], "row 1 is not a mapping"),
    ([{"id": "a", "match": {"kernel": ["1"]}, "symptom": "s", "fix": "f"}], "row 1 (a) lacks source"),
    ([{"id": "a", "match": {"kernel": "1"}, "symptom": "s", "fix": "f", "source": "u"}], "non-empty list of specs"),
    ([{"id": "a", "match": {"k": ["1"]}, "symptom": "s", "fix": "f", "source": "u"}] * 2, "id a is used twice"),
])
def test_a_bad_table_is_refused_naming_the_row(table, message):
    with pytest.raises(KnownBadError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_table(table)


@pytest.mark.parametrize("cmdline,expected", [
    ("BOOT_IMAGE=/vmlinuz-7.0.0-1019-nvidia root=UUID=x ro quiet splash", "on"),
    ("BOOT_IMAGE=/vmlinuz ro kho=off quiet", "off"),
    ("ro kho=on", "on"),
    ("ro nokho=off", "on"),
    (None, "on"),
])
def test_kexec_handover_from_the_kernel_command_line(cmdline, expected):
    assert kho_state(cmdline) == expected


@pytest.mark.parametrize("toml,daemon,expected", [
    ('[nvidia-container-runtime]\nmode = "cdi"\n', None, "cdi"),
    ('[nvidia-container-runtime]\nmode = "legacy"\n', '{"features": {"cdi": true}}', "cdi"),
    ('[nvidia-container-runtime]\nmode = "legacy"\n', '{"runtimes": {}}', "legacy"),
    ('[nvidia-container-runtime]\n#mode = "cdi"\n', "", "auto"),
    (None, "not json", "auto"),
    (None, None, None),
])
def test_the_toolkits_mode(toml, daemon, expected):
    assert toolkit_mode(toml, daemon) == expected
