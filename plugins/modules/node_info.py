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
  - On request, what the roles rely on later, namely passwordless C(sudo), the container engine as the admin user reaches it
    (its runtimes, the NVIDIA one, where it keeps images, whether the serving image is there), commands on the PATH,
    free disk under given folders, and which models are complete in the Hugging Face cache.
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
  uname:
    description: The C(uname) command (C(uname -r) gives the kernel release in RV(node_info.host_stack)).
    type: str
    default: uname
    version_added: 0.3.0
  sysfs:
    description: Where sysfs is mounted (the RoCE devices' PCIe link widths are read under it).
    type: path
    default: /sys
    version_added: 0.3.0
  check_sudo:
    description: Run C(sudo -n true) and report whether sudo works without a password.
    type: bool
    default: false
    version_added: 0.2.0
  container_cli:
    description: The container CLI as a list of words (e.g. C([docker]) or C([sudo, docker])); empty reads no container engine.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  image:
    description: With O(container_cli), the image whose presence is reported.
    type: str
    default: ""
    version_added: 0.2.0
  commands:
    description: Commands whose presence on the PATH is reported.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  disk_paths:
    description:
      - Name to folder; the free space of each is reported (a leading C(~) is the module user's home; a folder that does not
        exist yet is measured at its nearest existing parent). With O(container_cli), C(images) is the engine's data root.
    type: dict
    default: {}
    version_added: 0.2.0
  hf_cache:
    description: The Hugging Face hub cache (C(.../hub)) in which O(models) are looked up.
    type: str
    default: ""
    version_added: 0.2.0
  models:
    description: Model ids (ORG/NAME) whose completeness marker (written by M(dgxspark.vllm.model_cache)) is looked up in O(hf_cache).
    type: list
    elements: str
    default: []
    version_added: 0.2.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
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
    sudo:
      description: With O(check_sudo), whether C(sudo -n true) worked (C(ok)) and what it said when not (C(error)); else null.
      type: dict
      sample: {ok: false, error: "sudo: a password is required"}
    containers:
      description:
        - With O(container_cli), whether the engine answered (C(ok), C(error)), its runtimes, whether the NVIDIA runtime or
          hook is there (C(nvidia)), where it keeps images (C(root_dir)) and whether O(image) is there (C(image_present));
          else null.
      type: dict
      sample: {ok: true, error: "", runtimes: [io.containerd.runc.v2, nvidia, runc], nvidia: true, root_dir: /var/lib/docker,
               image_present: false}
    commands_missing:
      description: The O(commands) not found on the PATH.
      type: list
      elements: str
    disk:
      description:
        - For each O(disk_paths) name, the folder, the folder measured (itself or its nearest existing parent), its free
          bytes and the device of its file system (folders on one file system share its free space).
      type: dict
      sample: {models: {path: /home/spark/.cache/huggingface, measured: /home/spark, free_bytes: 400000000000, device: 66306}}
    models_complete:
      description: For each of O(models), whether its completeness marker is in O(hf_cache).
      type: dict
      sample: {Sebesky/MiniMax-M3-W4A16-GPTQ: true}
    host_stack:
      description:
        - What the known-bad table (roles/preflight/files/known_bad.yml) matches, each null when it could not be read.
        - C(kernel) (C(uname -r)); C(kho) (C(off) when the kernel command line says C(kho=off), else C(on));
          C(driver) (from C(nvidia-smi)); C(container_toolkit) (the nvidia-container-toolkit package's version) and
          C(container_toolkit_mode) (C(cdi) when its runtime's mode is cdi or Docker's cdi feature is on, else the
          runtime's mode); C(bios_version) and C(bios_date); C(rail_pcie_width) (the narrowest PCIe link width of the
          functions behind the RoCE devices that are Up).
      type: dict
      sample: {kernel: 6.17.0-1032-nvidia, kho: "on", driver: "580.95.05", container_toolkit: 1.19.0-1,
               container_toolkit_mode: legacy, bios_version: 5.36_0ACUM023, bios_date: 12/25/2025, rail_pcie_width: "4"}
      version_added: 0.3.0
    errors:
      description: Commands or files that could not be read, with the reason.
      type: list
      elements: str
"""

import json
import os
import platform
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils._model_cache import MARKER as MODEL_MARKER
from ansible_collections.dgxspark.vllm.plugins.module_utils._node_info import (
    free_bytes, kho_state, parse_gpu_query, parse_ibdev2netdev, parse_ipv4, parse_meminfo, parse_nvidia_smi, rail_pcie_width,
    toolkit_mode)

NVIDIA_HOOK = "nvidia-container-runtime-hook"


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
            uname=dict(type="str", default="uname"),
            sysfs=dict(type="path", default="/sys"),
            check_sudo=dict(type="bool", default=False),
            container_cli=dict(type="list", elements="str", default=[]),
            image=dict(type="str", default=""),
            commands=dict(type="list", elements="str", default=[]),
            disk_paths=dict(type="dict", default={}),
            hf_cache=dict(type="str", default=""),
            models=dict(type="list", elements="str", default=[]),
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
    rdma = parse_ibdev2netdev(ports) if ports is not None else []

    sysfs = os.path.join("/sys/class/net", iface)
    fabric = {"name": iface, "exists": os.path.isdir(sysfs), "ipv4": [], "mtu": None, "operstate": None}
    if fabric["exists"]:
        mtu = (_read(os.path.join(sysfs, "mtu")) or "").strip()
        fabric["mtu"] = int(mtu) if mtu.isdigit() else None
        fabric["operstate"] = (_read(os.path.join(sysfs, "operstate")) or "").strip() or None
        addrs = _run(module, "ip", ["-o", "-4", "addr", "show", "dev", iface], errors)
        fabric["ipv4"] = parse_ipv4(addrs or "")

    p = module.params
    containers = _containers(module, p["container_cli"], p["image"]) if p["container_cli"] else None
    disk_paths = dict(p["disk_paths"])
    if containers and containers["root_dir"]:
        disk_paths.setdefault("images", containers["root_dir"])
    hf_cache = _home(p["hf_cache"])
    module.exit_json(changed=False, node_info={
        "arch": platform.machine(),
        "user": pwd.getpwuid(os.getuid()).pw_name,
        "mem_total_bytes": meminfo.get("MemTotal"),
        "mem_available_bytes": meminfo.get("MemAvailable"),
        "gpu": gpu,
        "rdma_ports": rdma,
        "fabric": fabric,
        "sudo": _sudo(module) if p["check_sudo"] else None,
        "containers": containers,
        "commands_missing": [c for c in p["commands"] if not module.get_bin_path(c)],
        "disk": {name: dict(path=_home(path), **free_bytes(_home(path))) for name, path in disk_paths.items()},
        "models_complete": {m: os.path.isfile(os.path.join(hf_cache, "models--" + m.replace("/", "--"), MODEL_MARKER))
                            for m in p["models"]} if hf_cache else {},
        "host_stack": _host_stack(module, gpu, rdma),
        "errors": errors,
    })


def _host_stack(module, gpu, rdma):
    """The releases the known-bad table matches; what cannot be read is null (the table calls it unknown)."""
    kernel = None
    uname = module.get_bin_path(module.params["uname"])
    if uname:
        rc, out, _err = module.run_command([uname, "-r"])
        kernel = (out.strip() or None) if rc == 0 else None
    toolkit = None
    dpkg = module.get_bin_path("dpkg-query")
    if dpkg:
        rc, out, _err = module.run_command([dpkg, "-W", "-f=${Version}", "nvidia-container-toolkit"])
        toolkit = (out.strip() or None) if rc == 0 else None
    sysfs = module.params["sysfs"]
    widths = [_read(os.path.join(sysfs, "class", "infiniband", p["device"], "device", "current_link_width"))
              for p in rdma if p["state"] == "Up"]
    return {
        "kernel": kernel,
        "kho": kho_state(_read("/proc/cmdline")),
        "driver": (gpu or {}).get("driver_version"),
        "container_toolkit": toolkit,
        "container_toolkit_mode": toolkit_mode(_read("/etc/nvidia-container-runtime/config.toml"),
                                               _read("/etc/docker/daemon.json")),
        "bios_version": (_read(os.path.join(sysfs, "class", "dmi", "id", "bios_version")) or "").strip() or None,
        "bios_date": (_read(os.path.join(sysfs, "class", "dmi", "id", "bios_date")) or "").strip() or None,
        "rail_pcie_width": rail_pcie_width(w for w in widths if w is not None),
    }


def _home(path):
    """A leading ~ as the home of the user the module runs as."""
    if path == "~" or path.startswith("~/"):
        return pwd.getpwuid(os.getuid()).pw_dir + path[1:]
    return path


def _sudo(module):
    if not module.get_bin_path("sudo"):
        return {"ok": False, "error": "sudo: command not found"}
    rc, out, err = module.run_command(["sudo", "-n", "true"])
    return {"ok": rc == 0, "error": "" if rc == 0 else (err or out).strip()[:300] or "exit %d" % rc}


def _containers(module, cli, image):
    """Whether the container engine answers this user, its runtimes, the NVIDIA runtime or hook, the image."""
    failed = {"ok": False, "runtimes": [], "nvidia": False, "root_dir": None, "image_present": False}
    if not module.get_bin_path(cli[0]):
        return dict(failed, error="%s: command not found" % cli[0])
    rc, out, err = module.run_command(cli + ["info", "--format", "{{json .}}"])
    if rc != 0:
        return dict(failed, error=(err or out).strip()[:400] or "exit %d" % rc)
    try:
        info = json.loads(out or "{}") or {}
    except ValueError:
        info = {}
    # Docker's CLI answers a daemon it cannot reach (no access to its socket) with rc 0 and ServerErrors.
    if info.get("ServerErrors"):
        return dict(failed, error="; ".join(info["ServerErrors"])[:400])
    runtimes = sorted(info.get("Runtimes") or {})
    present = bool(image) and module.run_command(cli + ["image", "inspect", image])[0] == 0
    return {"ok": True, "error": "", "runtimes": runtimes, "root_dir": info.get("DockerRootDir"),
            "nvidia": "nvidia" in runtimes or bool(module.get_bin_path(NVIDIA_HOOK)), "image_present": present}


if __name__ == "__main__":
    main()
