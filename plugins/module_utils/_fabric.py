# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fabric's figures between two nodes, and what a low one most likely means.

* The raw link, per RoCE device: perftest's ``ib_write_bw`` (client on the head, server on the worker). A healthy
  ConnectX-7 rail of a Spark carries 92-97 Gb/s (NVIDIA's two-Spark guide: 92.57 and 97.28 Gb/s on the two twins of
  one port); a degraded initialization shows ~13 Gb/s while the link reports 200G (dgx-spark-playbooks PR 108,
  which calls 8-25 Gb/s degraded).
* The engine's own path: a collective across the nodes from the serving image, reported as nccl-tests does (bus
  bandwidth: all-gather algbw x (n-1)/n, all-reduce algbw x 2(n-1)/n). Two healthy Sparks give 20-24 GB/s of
  all-gather bus bandwidth with both twins in NCCL_IB_HCA; a flat ~3 GB/s is a fault (NVIDIA's NCCL playbook).
"""

from __future__ import annotations

import re
import subprocess

# Defaults of the thresholds (the role's variables carry them, with these sources in its README).
RAIL_MIN_GBPS = 80.0
DEGRADED_MAX_GBPS = 25.0
BUSBW_MIN_GBYTES = 15.0


def parse_ib_write_bw(text):
    """The average bandwidth in Gb/s from perftest's report (``--report_gbits``; MB/s reports are converted), or
    None when the output holds no result line."""
    lines = (text or "").splitlines()
    for i, line in enumerate(lines):
        if "BW average" not in line:
            continue
        header = re.split(r"\s{2,}", line.strip())
        column = next((n for n, h in enumerate(header) if h.startswith("BW average")), None)
        unit_mb = "MB/sec" in header[column] if column is not None else False
        for row in lines[i + 1:]:
            fields = row.split()
            if len(fields) >= len(header) and all(re.fullmatch(r"[0-9.]+", f) for f in fields[:len(header)]):
                value = float(fields[column])
                return value * 8 / 1000 if unit_mb else value
    return None


def rail_verdict(pair, device, gbps, minimum=RAIL_MIN_GBPS):
    """Whether one RoCE rail between two nodes carries what it should, and the likely cause when not."""
    if gbps is None:
        return {"ok": False, "pair": pair, "device": device, "gbps": None, "minimum": minimum,
                "message": "%s, %s: ib_write_bw gave no figure (the device has no link, or the server side did not "
                           "start): check `ibdev2netdev` on both nodes." % (pair, device)}
    if gbps >= minimum:
        return {"ok": True, "pair": pair, "device": device, "gbps": gbps, "minimum": minimum,
                "message": "%s, %s: %.1f Gb/s of RDMA writes (at least %.0f)." % (pair, device, gbps, minimum)}
    if gbps <= DEGRADED_MAX_GBPS:
        cause = ("the degraded initialization of the ConnectX-7 seen on DGX OS 7.5 (the link reports 200G and carries "
                 "a tenth of it). Fix: power-cycle both nodes (a reboot may keep it), then measure again")
    else:
        cause = ("a link trained narrower or slower than it reports (PCIe x2 on a twin's controller, MTU 1500 on one "
                 "side). Fix: check `cat /sys/class/infiniband/%s/device/current_link_width` (4), the MTU (9000) on both "
                 "nodes, and the firmware" % device)
    return {"ok": False, "pair": pair, "device": device, "gbps": gbps, "minimum": minimum,
            "message": "%s, %s: %.1f Gb/s of RDMA writes, below %.0f. Likely %s." % (pair, device, gbps, minimum, cause)}


def bus_bandwidth(op, size_bytes, seconds, ranks):
    """nccl-tests' bus bandwidth in GB/s for one collective of size_bytes taking seconds across ranks."""
    if seconds <= 0 or ranks < 2:
        return None
    algbw = size_bytes / seconds / 1e9
    factor = {"all_gather": (ranks - 1) / ranks, "all_reduce": 2 * (ranks - 1) / ranks}[op]
    return algbw * factor


def collective_verdict(op, busbw, minimum=BUSBW_MIN_GBYTES, hca_twins_listed=True, backend="nccl"):
    """Whether the engine's path across the nodes carries what a healthy pair does, and the likely cause when not."""
    if busbw is not None and busbw >= minimum:
        return {"ok": True, "busbw": busbw, "minimum": minimum,
                "message": "%s from the serving image: %.1f GB/s of bus bandwidth (at least %.0f)." % (op, busbw, minimum)}
    if busbw is None:
        cause = "the collective did not complete (see its output)"
    elif backend == "gloo":
        cause = ("the socket path gloo takes (GLOO_SOCKET_IFNAME's interface, its MTU) or the CPUs that copy the bytes: "
                 "gloo does not use RoCE")
    elif not hca_twins_listed:
        cause = "NCCL_IB_HCA lists one twin of the port: list both Up RoCE devices"
    elif busbw < 5:
        cause = ("NCCL is not on RoCE (NCCL_IB_DISABLE, no RoCE device in NCCL_IB_HCA, a GID index without RoCEv2) or a "
                 "known-bad NCCL or kernel: run it with NCCL_DEBUG=INFO and look for 'NET/IB : Using'")
    else:
        cause = "a rail below its figure (see the raw link above) or an MTU below 9000"
    return {"ok": False, "busbw": busbw, "minimum": minimum,
            "message": "%s from the serving image: %s GB/s of bus bandwidth, below %.0f. Likely %s."
                       % (op, "no figure" if busbw is None else "%.1f" % busbw, minimum, cause)}


def start(argv):
    """Start a command whose output is collected later (the worker's side of a measurement, over SSH): a Popen."""
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
