#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_probe
short_description: Measure the raw fabric link from the head to each worker (RDMA per RoCE device, and TCP)
version_added: 0.3.0
description:
  - Runs on the head. For each worker and each RoCE device, starts perftest's C(ib_write_bw) as the server on the worker
    (over the collection's head-to-worker SSH) and as the client here, and reads the average bandwidth; then streams
    TCP to the worker's fabric address for a few seconds and reads what arrived.
  - Each figure is judged against its threshold; a low one is named with the node pair, the device, the figure, the
    threshold and its likely cause (see RV(results)). The module fails only when it cannot run; the caller decides
    what a low figure stops.
  - Sends test traffic over the fabric and changes nothing, so it runs in check mode too.
options:
  workers:
    description: The workers to measure against (their names in the messages).
    type: list
    elements: str
    required: true
  addresses:
    description: Each worker's fabric IPv4 address (name -> address); a worker not listed is reached at its name.
    type: dict
    default: {}
  user:
    description: The user the head logs in to the workers as.
    type: str
    required: true
  devices:
    description: The RoCE devices to measure (each on both ends); the Up devices of the port as C(ibdev2netdev) shows them.
    type: list
    elements: str
    required: true
  ib_write_bw:
    description: The C(ib_write_bw) command (perftest) on both nodes.
    type: str
    default: ib_write_bw
  seconds:
    description: How long each measurement runs.
    type: int
    default: 5
  port:
    description: First TCP port the measurements listen on, on the worker (one per device, then one for TCP).
    type: int
    default: 18515
  rail_min_gbps:
    description: Least RDMA write bandwidth a rail must carry, in Gb/s.
    type: float
    default: 80
  tcp_min_gbps:
    description: Least TCP bandwidth (one stream) to the worker's fabric address, in Gb/s; 0 measures without judging.
    type: float
    default: 0
  head_name:
    description: This node's name in the messages (its host name when empty).
    type: str
    default: ""
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
  - dgxspark.vllm.ssh
attributes:
  check_mode:
    support: full
    details: It measures (test traffic only) in check mode too.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Measure the fabric to every worker
  dgxspark.vllm.fabric_probe:
    workers: [spark-worker-1]
    addresses: {spark-worker-1: 10.0.0.2}
    user: spark
    devices: [rocep1s0f1, roceP2p1s0f1]
  register: fabric
"""

RETURN = r"""
results:
  description: One entry per worker and device (C(kind) rdma) and per worker (C(kind) tcp), each with C(pair), C(device),
    the figure (C(gbps)), the threshold (C(minimum)), C(ok) and a C(message) naming the likely cause when low.
  returned: always
  type: list
  elements: dict
failed_checks:
  description: The messages of the results that are not C(ok).
  returned: always
  type: list
  elements: str
"""

import os
import shlex
import socket
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _fabric, _ssh

# The worker's end of the TCP figure: accept one connection, count what arrives, print the count.
TCP_SINK = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1]))); s.listen(1); s.settimeout(float(sys.argv[2]) + 30)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    n += len(b)
print(n)
"""


def remote(module, worker, command, seconds):
    """Start a command on the worker over the collection's SSH contract, its output collected later."""
    target = "%s@%s" % (worker["user"], worker["address"])
    return _fabric.start(_ssh.from_params(module.params) + [target, "timeout %d %s" % (seconds + 30, command)])


def rdma(module, worker, device, port):
    p = module.params
    args = "-d %s -p %d -F --report_gbits -D %d" % (shlex.quote(device), port, p["seconds"])
    server = remote(module, worker, "%s %s" % (shlex.quote(p["ib_write_bw"]), args), p["seconds"])
    time.sleep(1)  # the server binds its port
    pair = "%s -> %s" % (module.params["head_name"], worker["name"])
    if server.poll() is not None:
        # The worker's side ended at once (SSH could not reach it, no ib_write_bw there): no client to wait out.
        _out, err = server.communicate()
        verdict = _fabric.rail_verdict(pair, device, None, p["rail_min_gbps"])
        verdict["message"] += " (the worker's side ended, exit %d: %s)" % (server.returncode, err.strip()[-300:])
        return dict(verdict, kind="rdma")
    rc, out, err = module.run_command(["timeout", str(p["seconds"] + 60), p["ib_write_bw"]] + args.split()
                                      + [worker["address"]])
    try:
        server.communicate(timeout=p["seconds"] + 40)
    except subprocess.TimeoutExpired:
        server.kill()
    verdict = _fabric.rail_verdict(pair, device, _fabric.parse_ib_write_bw(out), p["rail_min_gbps"])
    if verdict["gbps"] is None:
        verdict["message"] += " (exit %d: %s)" % (rc, (err or out).strip()[-300:])
    return dict(verdict, kind="rdma")


def tcp(module, worker, port):
    p = module.params
    sink = remote(module, worker, "python3 -c %s %d %d" % (shlex.quote(TCP_SINK), port, p["seconds"]), p["seconds"])
    pair = "%s -> %s" % (p["head_name"], worker["name"])
    sent, started = 0, time.monotonic()
    chunk = b"\0" * (1 << 20)
    conn = None
    for _attempt in range(20):  # the sink binds its port
        if sink.poll() is not None:  # the sink's side ended (SSH could not reach the worker): nothing will listen
            break
        try:
            conn = socket.create_connection((worker["address"], port), timeout=10)
            break
        except OSError:
            time.sleep(0.5)
    if conn is None:
        sink.kill()
        return {"kind": "tcp", "pair": pair, "device": "tcp", "gbps": None, "minimum": p["tcp_min_gbps"], "ok": False,
                "message": "%s: no TCP connection to %s:%d on the fabric (%s)." % (
                    pair, worker["address"], port, (sink.communicate()[1] or "").strip()[-300:])}
    with conn:
        started = time.monotonic()
        while time.monotonic() - started < p["seconds"]:
            conn.sendall(chunk)
            sent += len(chunk)
    out, _err = sink.communicate(timeout=60)
    took = time.monotonic() - started
    received = int(out.strip() or 0)
    gbps = received * 8 / took / 1e9 if took > 0 else 0.0
    ok = p["tcp_min_gbps"] <= 0 or gbps >= p["tcp_min_gbps"]
    return {"kind": "tcp", "pair": pair, "device": "tcp", "gbps": round(gbps, 2), "minimum": p["tcp_min_gbps"], "ok": ok,
            "message": "%s: %.1f Gb/s of TCP (one stream) to %s%s." % (
                pair, gbps, worker["address"], "" if ok else ", below %.0f: check the MTU (9000) and the link speed "
                "(`ethtool`) on both nodes" % p["tcp_min_gbps"])}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            workers=dict(type="list", elements="str", required=True),
            addresses=dict(type="dict", default={}),
            user=dict(type="str", required=True),
            devices=dict(type="list", elements="str", required=True),
            ib_write_bw=dict(type="str", default="ib_write_bw"),
            seconds=dict(type="int", default=5),
            port=dict(type="int", default=18515),
            rail_min_gbps=dict(type="float", default=_fabric.RAIL_MIN_GBPS),
            tcp_min_gbps=dict(type="float", default=0.0),
            head_name=dict(type="str", default=""),
            **_ssh.ARGUMENT_SPEC
        ),
        supports_check_mode=True,
    )
    p = module.params
    p["head_name"] = p["head_name"] or os.uname().nodename
    if not module.get_bin_path(p["ib_write_bw"]):
        module.fail_json(msg="%s is not installed on this node: perftest's ib_write_bw measures the RoCE rails "
                             "(`sudo apt-get install perftest` on every node)." % p["ib_write_bw"])
    results = []
    for name in p["workers"]:
        worker = {"name": name, "address": p["addresses"].get(name, name), "user": p["user"]}
        for n, device in enumerate(p["devices"]):
            results.append(rdma(module, worker, device, p["port"] + n))
        results.append(tcp(module, worker, p["port"] + len(p["devices"])))
    module.exit_json(changed=False, results=results, failed_checks=[r["message"] for r in results if not r["ok"]])


if __name__ == "__main__":
    main()
