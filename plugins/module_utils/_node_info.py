# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsers for what a node says about its GPU, its RoCE ports, its memory and its host stack."""

from __future__ import annotations

import json
import os
import re

_DRIVER = re.compile(r"Driver Version:\s*([0-9.]+)")
_CUDA = re.compile(r"CUDA Version:\s*([0-9.]+)")
# "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)"
_PORT = re.compile(r"^(\S+)\s+port\s+(\d+)\s+==>\s+(\S+)\s+\((\w+)\)", re.M)
# "2: enp1s0f1np1    inet 10.231.108.10/24 brd ... scope global enp1s0f1np1"
_INET = re.compile(r"\binet\s+(\d{1,3}(?:\.\d{1,3}){3})/(\d{1,2})")


def parse_nvidia_smi(text):
    """Driver and CUDA versions from the header of plain `nvidia-smi` output."""
    driver = _DRIVER.search(text)
    cuda = _CUDA.search(text)
    return {
        "driver_version": driver.group(1) if driver else None,
        "cuda_version": cuda.group(1) if cuda else None,
    }


def parse_gpu_query(text):
    """GPUs from `nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader`."""
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and fields[0].isdigit():
            gpus.append({"index": int(fields[0]), "name": fields[1], "driver_version": fields[2]})
    return gpus


def parse_ibdev2netdev(text):
    """RDMA ports and their netdevs from `ibdev2netdev` output."""
    return [{"device": m.group(1), "port": int(m.group(2)), "netdev": m.group(3), "state": m.group(4),
             "line": m.group(0)} for m in _PORT.finditer(text)]


def parse_ipv4(text):
    """IPv4 addresses (address/prefix) from `ip -o -4 addr show` output."""
    return [f"{m.group(1)}/{m.group(2)}" for m in _INET.finditer(text)]


def parse_meminfo(text):
    """/proc/meminfo as bytes per field (fields given in kB)."""
    result = {}
    for line in text.splitlines():
        name, _sep, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            result[name.strip()] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return result


def free_bytes(path):
    """Free bytes for an unprivileged user on the file system that holds path (or its nearest existing parent)."""
    measured = os.path.abspath(path)
    while not os.path.exists(measured) and measured != os.path.dirname(measured):
        measured = os.path.dirname(measured)
    stat = os.statvfs(measured)
    return {"measured": measured, "free_bytes": stat.f_bavail * stat.f_frsize, "device": os.stat(measured).st_dev}


def kho_state(cmdline):
    """Kexec HandOver as the kernel command line leaves it: "off" when it says kho=off, else "on" (the default of
    the kernels that have it)."""
    return "off" if re.search(r"(^|\s)kho=(off|0|n)(\s|$)", cmdline or "") else "on"


def toolkit_mode(config_toml, daemon_json):
    """How the NVIDIA container toolkit hands the GPU to containers: "cdi" when its runtime's mode is cdi or Docker's
    cdi feature is on, else the runtime's mode ("legacy", "auto"; "auto" when the file does not set one); None when
    neither file was read."""
    if config_toml is None and daemon_json is None:
        return None
    try:
        features = (json.loads(daemon_json or "{}") or {}).get("features") or {}
    except ValueError:
        features = {}
    m = re.search(r'^\s*mode\s*=\s*"([^"]*)"', config_toml or "", re.M)
    mode = m.group(1) if m else "auto"
    return "cdi" if mode == "cdi" or features.get("cdi") is True else mode


def rail_pcie_width(widths):
    """The narrowest PCIe link width (as text) among the RoCE devices' functions; None when none was read."""
    read = [int(w) for w in widths if str(w).strip().isdigit()]
    return str(min(read)) if read else None
