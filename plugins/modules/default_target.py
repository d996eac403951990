#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: default_target
short_description: Set the systemd default target, and optionally switch to it now
version_added: 0.1.0
description:
  - Sets the target the node boots into (C(systemctl set-default)) when it differs.
  - With O(isolate=true), also switches the running system to it (C(systemctl isolate)) when the target is not
    active or C(graphical.target) still is; this stops the display manager when leaving the desktop.
    Units the target wants, such as sshd under C(multi-user.target), keep running.
options:
  target:
    description: The target to boot into.
    type: str
    default: multi-user.target
  isolate:
    description: Also switch to the target now.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  diff_mode:
    support: full
    details: The diff shows the default target, the active target and the services the switch stops.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Boot without the desktop and leave it now
  dgxspark.vllm.default_target:
    target: multi-user.target
    isolate: true
  become: true
"""

RETURN = r"""
default_before:
  description: The default target before the change.
  returned: always
  type: str
  sample: graphical.target
default_after:
  description: The default target after the change (as it would be, in check mode).
  returned: always
  type: str
  sample: multi-user.target
isolated:
  description: Whether the running system was (or, in check mode, would be) switched to the target.
  returned: always
  type: bool
stopped_units:
  description:
    - The services that were running before the switch and are not after it.
    - In check mode, those the switch would stop (running, not wanted by the target, not ignoring isolate).
  returned: always
  type: list
  elements: str
  sample: [gdm.service]
"""

from ansible.module_utils.basic import AnsibleModule

GRAPHICAL = "graphical.target"


def _systemctl(module, *args, check_rc=True):
    rc, out, err = module.run_command([module.get_bin_path("systemctl", required=True)] + list(args))
    if check_rc and rc != 0:
        module.fail_json(msg=f"systemctl {' '.join(args)} failed (exit {rc}): {(err or out).strip()}")
    return rc, out.strip()


def _active(module, unit):
    return _systemctl(module, "is-active", unit, check_rc=False)[1] == "active"


def _running_services(module):
    out = _systemctl(module, "list-units", "--type=service", "--state=running", "--plain", "--no-legend",
                     "--no-pager")[1]
    return set(line.split()[0] for line in out.splitlines() if line.split())


def _would_stop(module, target, running):
    """The running services an isolate to target stops: not in its dependency closure, not ignoring isolate."""
    out = _systemctl(module, "list-dependencies", "--plain", "--no-pager", target)[1]
    # --plain still marks each unit's state with a dot on newer systemd: the unit is the last word.
    kept = set(line.split()[-1] for line in out.splitlines() if line.split())
    candidates = sorted(running - kept)
    if not candidates:
        return []
    out = _systemctl(module, "show", "--property=Id,IgnoreOnIsolate", *candidates)[1]
    ignoring = set()
    for block in out.split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("IgnoreOnIsolate") == "yes":
            ignoring.add(props.get("Id"))
    return [u for u in candidates if u not in ignoring]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            target=dict(type="str", default="multi-user.target"),
            isolate=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    target = module.params["target"]
    if not target.endswith(".target"):
        module.fail_json(msg=f"target must be a systemd target unit (NAME.target), got {target!r}")

    before = _systemctl(module, "get-default")[1]
    set_default = before != target
    isolate = module.params["isolate"] and (
        not _active(module, target) or (target != GRAPHICAL and _active(module, GRAPHICAL)))
    graphical_before = "active" if _active(module, GRAPHICAL) else "inactive"

    stopped = []
    if isolate:
        running = _running_services(module)
        if module.check_mode:
            stopped = _would_stop(module, target, running)
    if not module.check_mode:
        if set_default:
            _systemctl(module, "set-default", target)
        if isolate:
            _systemctl(module, "isolate", target)
            stopped = sorted(running - _running_services(module))

    changed = set_default or isolate
    result = dict(changed=changed, default_before=before, default_after=target, isolated=isolate,
                  stopped_units=stopped)
    if module._diff:
        graphical_after = "inactive" if isolate and target != GRAPHICAL else graphical_before
        result["diff"] = dict(
            before=f"default: {before}\n{GRAPHICAL}: {graphical_before}\n",
            after=f"default: {target}\n{GRAPHICAL}: {graphical_after}\n"
                  + "".join(f"stopped: {u}\n" for u in stopped),
            before_header="systemd targets", after_header="systemd targets")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
