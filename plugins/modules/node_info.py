#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_info
short_description: Read what the readiness checks need from a DGX Spark node
version_added: 0.1.0
description:
  - Reads the node's architecture, admin user, memory, GPU driver and CUDA versions (from C(nvidia-smi)),
    RoCE ports (from C(ibdev2netdev)) and the fabric interface's IPv4 addresses, MTU and link state.
  - Changes nothing. A command that is missing or fails is reported in RV(node_info.errors), not as a module failure,
    so the caller can name the problem and the fix.
options:
  fabric_iface:
    description: The ConnectX-7 netdev that carries the fabric address.
    type: str
    required: true
  nvidia_smi:
    description: The C(nvidia-smi) command.
    type: str
    default: nvidia-smi
  ibdev2netdev:
    description: The C(ibdev2netdev) command.
    type: str
    default: ibdev2netdev
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
    support: full
  platform:
    support: full
    platforms: posix
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Read the node
  dgxspark.vllm.node_info:
    fabric_iface: enp1s0f1np1
  register: node
"""

RETURN = r"""
node_info:
  description: What the node reported.
  returned: always
  type: dict
  contains:
    arch:
      description: Machine architecture (C(uname -m)).
      type: str
      sample: aarch64
    user:
      description: The user the module runs as.
      type: str
      sample: spark
    mem_total_bytes:
      description: MemTotal from /proc/meminfo.
      type: int
    mem_available_bytes:
      description: MemAvailable from /proc/meminfo.
      type: int
    gpu:
      description: Driver and CUDA versions and the GPUs, from C(nvidia-smi); null when it could not be read.
      type: dict
      sample: {driver_version: "580.95.05", cuda_version: "13.0", gpus: [{index: 0, name: NVIDIA GB10}]}
    rdma_ports:
      description: Ports listed by C(ibdev2netdev) (device, port, netdev, state, and the line as printed).
      type: list
      elements: dict
    fabric:
      description: The fabric interface (name, exists, ipv4 as address/prefix, mtu, operstate).
      type: dict
    errors:
      description: Commands or files that could not be read, with the reason.
      type: list
      elements: str
"""

import os
import platform
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils._node_info import (
    parse_gpu_query, parse_ibdev2netdev, parse_ipv4, parse_meminfo, parse_nvidia_smi)


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _run(module, command, args, errors):
    path = module.get_bin_path(command)
    if not path:
        errors.append(f"{command}: command not found")
        return None
    rc, out, err = module.run_command([path] + args)
    if rc != 0:
        errors.append(f"{command} {' '.join(args)}: exit {rc}: {(err or out).strip()[:300]}")
        return None
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            fabric_iface=dict(type="str", required=True),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            ibdev2netdev=dict(type="str", default="ibdev2netdev"),
        ),
        supports_check_mode=True,
    )
    iface = module.params["fabric_iface"]
    errors = []

    meminfo = parse_meminfo(_read("/proc/meminfo") or "")
    gpu = None
    query = _run(module, module.params["nvidia_smi"], ["--query-gpu=index,name,driver_version", "--format=csv,noheader"], errors)
    if query is not None:
        gpus = parse_gpu_query(query)
        # The CUDA version the driver supports is only in the plain output's header.
        header = parse_nvidia_smi(_run(module, module.params["nvidia_smi"], [], errors) or "")
        drivers = sorted({g["driver_version"] for g in gpus})
        gpu = {
            "driver_version": drivers[0] if len(drivers) == 1 else header["driver_version"],
            "cuda_version": header["cuda_version"],
            "gpus": [{"index": g["index"], "name": g["name"]} for g in gpus],
        }
    ports = _run(module, module.params["ibdev2netdev"], [], errors)

    sysfs = os.path.join("/sys/class/net", iface)
    fabric = {"name": iface, "exists": os.path.isdir(sysfs), "ipv4": [], "mtu": None, "operstate": None}
    if fabric["exists"]:
        mtu = (_read(os.path.join(sysfs, "mtu")) or "").strip()
        fabric["mtu"] = int(mtu) if mtu.isdigit() else None
        fabric["operstate"] = (_read(os.path.join(sysfs, "operstate")) or "").strip() or None
        addrs = _run(module, "ip", ["-o", "-4", "addr", "show", "dev", iface], errors)
        fabric["ipv4"] = parse_ipv4(addrs or "")

    module.exit_json(changed=False, node_info={
        "arch": platform.machine(),
        "user": pwd.getpwuid(os.getuid()).pw_name,
        "mem_total_bytes": meminfo.get("MemTotal"),
        "mem_available_bytes": meminfo.get("MemAvailable"),
        "gpu": gpu,
        "rdma_ports": parse_ibdev2netdev(ports) if ports is not None else [],
        "fabric": fabric,
        "errors": errors,
    })


if __name__ == "__main__":
    main()
