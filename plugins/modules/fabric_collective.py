#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_collective
short_description: One rank of a collective across the nodes, run from the serving image with the engine's container settings
version_added: 0.3.0
description:
  - Runs the serving image once on this node, with the options and environment the engine's containers get (host network,
    C(NCCL_SOCKET_IFNAME), C(NCCL_IB_HCA), ...), as rank O(rank) of O(world_size). The ranks meet at O(master_addr):O(master_port)
    (rank 0's node) and time all-gather and all-reduce at each of O(sizes), as nccl-tests reports them (bus bandwidth).
  - It reports the NCCL version torch loaded and the C(libnccl) file the process mapped, so the figure comes with the
    library that made it. Rank 0 judges each operation's figure at the largest size against O(min_busbw_gbytes).
  - Every rank must run at the same time (start it with C(async) on every node); a rank that does not come within
    O(timeout) seconds fails them all, named.
  - Runs a container that removes itself and sends test traffic; it changes nothing, so it runs in check mode too.
options:
  image:
    description: The serving image (reference or ID).
    type: str
    required: true
  container_cli:
    description: The container CLI, as a list of words.
    type: list
    elements: str
    default: [docker]
  options:
    description: The C(docker run) options the engine's containers get (the ray_cluster role's C(ray_cluster_container_opts)).
    type: list
    elements: str
    default: []
  name:
    description: Name of the container (one at a time per node).
    type: str
    default: dgxspark-fabric-collective
  rank:
    description: This node's rank (0 on the head).
    type: int
    required: true
  world_size:
    description: How many nodes take part.
    type: int
    required: true
  master_addr:
    description: Rank 0's fabric address.
    type: str
    required: true
  master_port:
    description: The TCP port rank 0 listens on for the others.
    type: int
    default: 29511
  backend:
    description: C(nccl) (the engine's path on the GPUs) or C(gloo) (on the CPU, the path a CPU build's ranks use).
    type: str
    choices: [nccl, gloo]
    default: nccl
  sizes:
    description: Message sizes in bytes.
    type: list
    elements: int
    default: [67108864, 268435456, 1073741824]
  iterations:
    description: Timed repetitions at each size (after one untimed).
    type: int
    default: 5
  timeout:
    description: Seconds for the whole run, the ranks' meeting included.
    type: int
    default: 300
  min_busbw_gbytes:
    description: Least bus bandwidth, GB/s, at the largest size (rank 0 judges); 0 records without judging.
    type: float
    default: 15
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  check_mode:
    support: full
    details: It runs the collective (test traffic, a container that removes itself) in check mode too.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: One rank of the collective on every node at once
  dgxspark.vllm.fabric_collective:
    image: vllm-node-minimax-m3-b12x:latest
    options: "{{ ray_cluster_container_opts }}"
    rank: "{{ groups['spark'].index(inventory_hostname) }}"
    world_size: "{{ groups['spark'] | length }}"
    master_addr: 10.0.0.1
  async: 600
  poll: 0
  register: collective_job
"""

RETURN = r"""
results:
  description: One entry per operation and size, each with C(op), C(bytes), C(seconds) (one operation, the median of the
    timed ones) and C(busbw_gbytes).
  returned: success
  type: list
  elements: dict
verdicts:
  description: On rank 0, one per operation at the largest size, with C(ok), C(busbw), C(minimum) and a C(message) naming
    the likely cause when low; empty on the other ranks.
  returned: success
  type: list
  elements: dict
nccl:
  description: The NCCL the image's torch loaded (C(version), C(file)); nulls with gloo on a CPU build.
  returned: success
  type: dict
backend:
  description: The backend the collective ran on.
  returned: success
  type: str
"""

import json
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _fabric

MARK = "DGXSPARK-FABRIC-COLLECTIVE "

# Run inside the serving image: torch.distributed as the engine's ranks use it, one rank per node.
SCRIPT = r"""
import datetime, json, os, statistics, sys, time
import torch
import torch.distributed as dist
backend, sizes, iterations, timeout = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], int(sys.argv[3]), int(sys.argv[4])
rank, world = int(os.environ["DGXSPARK_RANK"]), int(os.environ["DGXSPARK_WORLD"])
dist.init_process_group(backend, init_method="tcp://%s:%s" % (os.environ["DGXSPARK_MASTER_ADDR"], os.environ["DGXSPARK_MASTER_PORT"]),
                        rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout))
device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
def timed(run):
    run(); sync(); dist.barrier()
    took = []
    for _ in range(iterations):
        start = time.perf_counter(); run(); sync(); took.append(time.perf_counter() - start)
    return statistics.median(took)
results = []
for size in sizes:
    part = torch.ones(size // 4 // world, dtype=torch.float32, device=device)
    parts = [torch.empty_like(part) for _ in range(world)]
    results.append({"op": "all_gather", "bytes": part.numel() * 4 * world, "seconds": timed(lambda: dist.all_gather(parts, part))})
    whole = torch.ones(size // 4, dtype=torch.float32, device=device)
    results.append({"op": "all_reduce", "bytes": whole.numel() * 4, "seconds": timed(lambda: dist.all_reduce(whole))})
    del part, parts, whole
nccl = {"version": None, "file": None}
try:
    v = torch.cuda.nccl.version()
    nccl["version"] = ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
except Exception:
    pass
with open("/proc/self/maps") as maps:
    nccl["file"] = next((line.split()[-1] for line in maps if "/libnccl" in line), None)
dist.destroy_process_group()
print("DGXSPARK-FABRIC-COLLECTIVE " + json.dumps({"results": results, "nccl": nccl}))
"""


def run_argv(p):
    env = {"DGXSPARK_RANK": p["rank"], "DGXSPARK_WORLD": p["world_size"], "DGXSPARK_MASTER_ADDR": p["master_addr"],
           "DGXSPARK_MASTER_PORT": p["master_port"]}
    return (p["container_cli"] + ["run", "--rm", "--name", p["name"]] + p["options"]
            + ["--env=%s=%s" % item for item in sorted(env.items())]
            + ["--entrypoint", "python3", p["image"], "-c", SCRIPT, p["backend"], ",".join(str(s) for s in p["sizes"]),
               str(p["iterations"]), str(p["timeout"])])


def parse(output):
    """The report line the script prints, or None."""
    line = next((l for l in (output or "").splitlines() if l.startswith(MARK)), None)
    return json.loads(line[len(MARK):]) if line else None


def verdicts(results, world_size, minimum, backend="nccl"):
    largest = max((r["bytes"] for r in results), default=0)
    out = []
    for r in results:
        if r["bytes"] != largest:
            continue
        v = _fabric.collective_verdict(r["op"], r["busbw_gbytes"], minimum, backend=backend) if minimum > 0 else {
            "ok": True, "busbw": r["busbw_gbytes"], "minimum": 0,
            "message": "%s from the serving image: %.2f GB/s of bus bandwidth (recorded, not judged)." % (r["op"], r["busbw_gbytes"])}
        out.append(dict(v, op=r["op"], bytes=r["bytes"], ranks=world_size))
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type="str", required=True),
            container_cli=dict(type="list", elements="str", default=["docker"]),
            options=dict(type="list", elements="str", default=[]),
            name=dict(type="str", default="dgxspark-fabric-collective"),
            rank=dict(type="int", required=True),
            world_size=dict(type="int", required=True),
            master_addr=dict(type="str", required=True),
            master_port=dict(type="int", default=29511),
            backend=dict(type="str", choices=["nccl", "gloo"], default="nccl"),
            sizes=dict(type="list", elements="int", default=[64 << 20, 256 << 20, 1 << 30]),
            iterations=dict(type="int", default=5),
            timeout=dict(type="int", default=300),
            min_busbw_gbytes=dict(type="float", default=_fabric.BUSBW_MIN_GBYTES),
        ),
        supports_check_mode=True,
    )
    p = module.params
    # A container of an earlier run that was cut off holds the name: remove it first.
    module.run_command(p["container_cli"] + ["rm", "-f", p["name"]])
    try:
        res = subprocess.run(run_argv(p), capture_output=True, text=True, timeout=p["timeout"] + 60, check=False)
        rc, out, err = res.returncode, res.stdout, res.stderr
    except subprocess.TimeoutExpired:
        module.run_command(p["container_cli"] + ["rm", "-f", p["name"]])
        module.fail_json(msg="rank %d of %d: the collective did not end within %d s (a rank that never came, or a "
                             "collective that hangs: check NCCL_IB_HCA and the known-bad NCCL releases)."
                             % (p["rank"], p["world_size"], p["timeout"] + 60))
    report = parse(out)
    if rc != 0 or report is None:
        module.fail_json(msg="rank %d of %d: the collective from %s failed (exit %d): %s"
                             % (p["rank"], p["world_size"], p["image"], rc, (err or out).strip()[-1500:]), rc=rc)
    results = [dict(r, busbw_gbytes=round(_fabric.bus_bandwidth(r["op"], r["bytes"], r["seconds"], p["world_size"]) or 0, 3))
               for r in report["results"]]
    module.exit_json(changed=False, results=results, nccl=report["nccl"], backend=p["backend"],
                     verdicts=verdicts(results, p["world_size"], p["min_busbw_gbytes"], p["backend"]) if p["rank"] == 0 else [])


if __name__ == "__main__":
    main()
