#!/usr/bin/env python3
"""Who owns what, counted over the roles and playbooks of a tree, side by side with another revision.

    python3 scripts/ownership.py                 # the working tree
    python3 scripts/ownership.py --base 940a28e  # the working tree next to that commit

Per role: how often it is included from outside it (include_role / import_role in another role or a
playbook), its variables read elsewhere (reads of ROLE_* in another role's files or a playbook), its private
variables read or set elsewhere (_ROLE_*), its variables given a fallback elsewhere (`ROLE_x | default(` outside
it: a shadow default, a copy of its value that drifts), set_fact tasks and lines of tasks. The totals
line is what docs/ records before and after a restructuring step.
"""
import argparse
import collections
import re
import subprocess
import sys

FIELDS = ("included_from_outside", "public_reads_elsewhere", "private_reads_elsewhere", "shadow_defaults", "set_fact", "task_lines")


def tree(rev):
    """path -> text of the YAML and templates of the roles and playbooks (and site.yml) at rev, or the working tree."""
    if rev:
        names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev], capture_output=True, text=True, check=True).stdout.split()
    else:
        names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], capture_output=True, text=True,
                               check=True).stdout.split()
    # What runs: a role's tasks, handlers, defaults, vars and templates, and the playbooks (meta/ is documentation).
    wanted = [n for n in names if (n.startswith(("roles/", "playbooks/")) and n.endswith((".yml", ".j2")) and "/meta/" not in n)
              or n == "site.yml"]
    out = {}
    for name in wanted:
        if rev:
            out[name] = subprocess.run(["git", "show", f"{rev}:{name}"], capture_output=True, text=True, check=True).stdout
        else:
            try:
                with open(name, encoding="utf-8") as handle:
                    out[name] = handle.read()
            except FileNotFoundError:
                continue
    return out


def owner(path):
    return path.split("/")[1] if path.startswith("roles/") else None


def count(files):
    roles = sorted({owner(p) for p in files if owner(p)})
    stats = {r: collections.Counter() for r in roles}
    include = re.compile(r"(?:include|import)_role:\s*\n\s*name:\s*dgxspark\.vllm\.([a-z_]+)")
    for path, text in files.items():
        here = owner(path)
        for role in include.findall(text):
            if role in stats and role != here:
                stats[role]["included_from_outside"] += 1
        for role in roles:
            if role == here:
                continue
            stats[role]["public_reads_elsewhere"] += len(re.findall(r"(?<![\w.])%s_[a-z0-9_]+" % role, text))
            stats[role]["private_reads_elsewhere"] += len(re.findall(r"(?<![\w.])_%s_[a-z0-9_]+" % role, text))
            stats[role]["shadow_defaults"] += len(re.findall(r"(?<![\w.])%s_[a-z0-9_]+\s*\|\s*default\(" % role, text))
        if here and "/tasks/" in path:
            stats[here]["set_fact"] += len(re.findall(r"ansible\.builtin\.set_fact:", text))
            stats[here]["task_lines"] += sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))
    return stats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a revision to count beside the working tree")
    args = parser.parse_args()
    now = count(tree(None))
    base = count(tree(args.base)) if args.base else None
    print("role".ljust(14) + "".join(f.rjust(24) for f in FIELDS))
    totals, base_totals = collections.Counter(), collections.Counter()
    for role in sorted(set(now) | set(base or {})):
        row = now.get(role, collections.Counter())
        totals.update(row)
        cells = []
        for field in FIELDS:
            cell = str(row[field])
            if base is not None:
                before = base.get(role, collections.Counter())[field]
                cell = f"{before} -> {row[field]}" if role in base else f"new: {row[field]}"
            cells.append(cell.rjust(24))
        print(role.ljust(14) + "".join(cells))
    if base is not None:
        for row in base.values():
            base_totals.update(row)
        print("total".ljust(14) + "".join(f"{base_totals[f]} -> {totals[f]}".rjust(24) for f in FIELDS))
    else:
        print("total".ljust(14) + "".join(str(totals[f]).rjust(24) for f in FIELDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
