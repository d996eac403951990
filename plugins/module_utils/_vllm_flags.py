# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The flags a vLLM accepts, read from its own argument parser, and the rendered flags checked against them."""
from __future__ import annotations

import difflib
import json
import re

# What DUMP_SCRIPT prints; a flag set kept from an older one is read again.
FORMAT = 3

# Runs inside the image with its own Python: vLLM's `serve` parser and the config classes whose JSON
# flags vLLM validates key by key. The parser's module moved between releases; both places are tried.
DUMP_SCRIPT = r"""
import dataclasses, importlib, json, os
import vllm
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
make = None
for where in ("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.launchers.cli_args"):
    try:
        make = importlib.import_module(where).make_arg_parser
        break
    except (ImportError, AttributeError):
        pass
parser = make(FlexibleArgumentParser())
flags = sorted({s[2:] for a in parser._actions for s in a.option_strings if s.startswith("--")})
cfg = importlib.import_module("vllm.config")
JSON_FLAGS = (("speculative-config", "SpeculativeConfig"), ("compilation-config", "CompilationConfig"),
              ("attention-config", "AttentionConfig"))
keys = {}
for flag, name in JSON_FLAGS:
    cls = getattr(cfg, name, None)
    if cls is not None and dataclasses.is_dataclass(cls):
        keys[flag] = sorted(f.name for f in dataclasses.fields(cls))
# The bounds the config classes declare on their fields (pydantic's gt/ge/lt/le), which vLLM enforces as it
# builds its config at start: field name -> {class: bounds}.
bounds = {}
for cname in sorted(dir(cfg)):
    cls = getattr(cfg, cname, None)
    for fname, info in (getattr(cls, "__pydantic_fields__", None) or {}).items() if isinstance(cls, type) else ():
        found = {}
        for meta in getattr(info, "metadata", None) or []:
            for key in ("gt", "ge", "lt", "le"):
                value = getattr(meta, key, None)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    found[key] = value
        if found:
            bounds.setdefault(fname, {})[cname] = found
def kind(convert):
    # What the parser's own converter takes, probed: whole numbers only (int), any number (float), or text
    # too (a string, "auto", "128k": not checked here).
    def attempt(text):
        try:
            return convert(text)
        except Exception:
            return ValueError
    if not callable(convert) or attempt("two") is not ValueError or attempt("1k") is not ValueError:
        return None
    one, half = attempt("7"), attempt("0.5")
    if type(one) is int and half is ValueError:
        return "int"
    return "float" if type(half) is float else None
values = {}
for action in parser._actions:
    longs = [s[2:] for s in action.option_strings if s.startswith("--")]
    if not longs or action.nargs == 0:
        continue
    spec = {}
    if kind(action.type):
        spec["type"] = kind(action.type)
    if action.choices is not None and not isinstance(action.choices, dict):
        spec["choices"] = [str(c) for c in action.choices]
    owners = bounds.get(action.dest) or {}
    if len({json.dumps(b, sort_keys=True) for b in owners.values()}) == 1:
        spec["config"], limits = next(iter(owners.items()))
        spec.update(limits)
    for name in longs if spec else ():
        values[name] = spec
json_values = {flag: {key: dict(by[name], config=name) for key, by in bounds.items() if name in by} for flag, name in JSON_FLAGS
               if flag in keys}
print("DGXSPARK-VLLM-FLAGS " + json.dumps({"version": vllm.__version__, "flags": flags, "json_keys": keys,
                                           "values": values, "json_values": json_values, "nccl": nccl(),
                                           "format": %d}))
""" % FORMAT
MARK = "DGXSPARK-VLLM-FLAGS "

# The NCCL the image's engine would load, read by the dump and alone where the image's vLLM cannot be read (a build
# whose parser moved, a stand-in): which NCCL is a fact of the image's torch and wheels, not of vLLM's parser.
NCCL_FUNC = r"""
def nccl():
    # The NCCL the engine loads: torch's CUDA build links it, so after `import torch` the process maps the file
    # (a link over pip's copy shows the file it points to); its version from torch. Else the NCCL wheel pip
    # installed. None of it in a CPU build.
    found = {"version": None, "file": None, "so_path_env": os.environ.get("VLLM_NCCL_SO_PATH") or None}
    try:
        import torch
        version = torch.cuda.nccl.version()
        found["version"] = ".".join(str(p) for p in version) if isinstance(version, tuple) else str(version)
    except Exception:
        pass
    try:
        with open("/proc/self/maps") as maps:
            found["file"] = next((line.split()[-1] for line in maps if "/libnccl" in line), None)
    except OSError:
        pass
    if found["version"] is None or found["file"] is None:
        from importlib import metadata
        for dist in ("nvidia-nccl-cu13", "nvidia-nccl-cu12"):
            try:
                wheel = metadata.distribution(dist)
            except metadata.PackageNotFoundError:
                continue
            libs = [f for f in wheel.files or () if "libnccl.so" in str(f)]
            found["version"] = found["version"] or wheel.version
            found["file"] = found["file"] or (os.path.realpath(str(wheel.locate_file(libs[0]))) if libs else None)
            break
    return found
"""
NCCL_MARK = "DGXSPARK-NCCL "
NCCL_SCRIPT = "import json, os\n" + NCCL_FUNC + "print(%r + json.dumps(nccl()))\n" % NCCL_MARK
DUMP_SCRIPT = DUMP_SCRIPT.replace("\nprint(\"DGXSPARK-VLLM-FLAGS \"", NCCL_FUNC + "print(\"DGXSPARK-VLLM-FLAGS \"", 1)


def parse_nccl(stdout):
    """What NCCL_SCRIPT printed (version, file, so_path_env), or None."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(NCCL_MARK):
            return json.loads(line[len(NCCL_MARK):])
    return None


def parse_dump(stdout):
    """The flag set printed by DUMP_SCRIPT (its last marked line), or None."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(MARK):
            data = json.loads(line[len(MARK):])
            if isinstance(data.get("flags"), list) and data["flags"]:
                return data
    return None


def _closest(word, known):
    match = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
    return match[0] if match else None


# A vLLM built from a git checkout carries its commit in its version (setuptools-scm: 0.1.dev21830+g8244d1c44,
# with .dYYYYMMDD after it when the tree was patched); a release or a wheel without it carries none.
_VERSION_COMMIT = re.compile(r"\+g([0-9a-f]{7,40})")


def build_problem(version, build, recipe="the recipe"):
    """A warning (str) when the image's vLLM is not the build the recipe pins (build.vllm_ref), else None."""
    ref = str((build or {}).get("vllm_ref") or "").lower()
    if not ref:
        return None
    match = _VERSION_COMMIT.search(str(version or ""))
    if match and ref.startswith(match.group(1)):
        return None
    patches = [str(p) for p in (build or {}).get("vllm_patches") or []]
    built = ("built from commit %s" % match.group(1)) if match else "with no commit in its version (a release, or a build that does not say)"
    return ("The image runs vLLM %s, %s; %s was published for vLLM built from %s%s (the launcher's --vllm-ref), and its "
            "flags, mods and kernels were proven on that build only. Build the image from that commit "
            "(image_build_args), or serve a recipe made for this vLLM." % (
                version or "?", built, recipe, ref[:12], (" with " + ", ".join(patches)) if patches else ""))


_BOUNDS = (("gt", ">", lambda x, b: x > b), ("ge", ">=", lambda x, b: x >= b),
           ("lt", "<", lambda x, b: x < b), ("le", "<=", lambda x, b: x <= b))


def value_problem(value, spec, version="?"):
    """Why vLLM would refuse this value of a flag (or JSON key) with this spec, as (reason, what) or None.

    what: "choice" (the parser's choices; the closest one named), "type" (its converter: a whole number, a
    number) or "range" (the bounds its config class declares, enforced as the engine starts).
    """
    if isinstance(value, (dict, list)) or value is None or isinstance(value, bool):
        return None
    text = str(value)
    choices = spec.get("choices")
    if choices and text not in choices:
        close = _closest(text, choices)
        return ("is %r, and vLLM %s takes one of %s.%s" % (
            text, version, ", ".join(choices[:40]) + (", ..." if len(choices) > 40 else ""),
            " Did you mean %r?" % close if close else ""), "typo" if close else "choice")
    kind = spec.get("type")
    number = value if isinstance(value, (int, float)) else None
    if kind in ("int", "float"):
        try:
            number = int(text) if kind == "int" else float(text)
        except ValueError:
            return ("is %r, and vLLM %s takes %s there." % (text, version, "a whole number" if kind == "int" else "a number"),
                    "type")
    failed = number is not None and [key for key, _sign, holds in _BOUNDS if key in spec and not holds(number, spec[key])]
    if failed:
        declared = " and ".join("%s %s" % (sign, spec[key]) for key, sign, _holds in _BOUNDS if key in spec)
        return ("is %s, and vLLM %s declares %s for it (%s), checked as the engine starts." % (
            text, version, declared, spec.get("config", "its config")), "range")
    return None


def problems(args, flagset, strict=True, overrides=None, recipe="the recipe", build=None):
    """Rendered flags (name -> value, as the serve role renders them) that the flag set does not know, or
    whose values it refuses (a type, a choice, a bound its config class declares; flags and JSON keys).

    Each problem: message, fatal. With strict (the image's own flag set) every unknown flag, JSON key or
    choice is fatal; otherwise (a shipped list of another release) only those with a close known match,
    which are typos, are fatal and the rest warnings. A value of the wrong type or out of range is fatal either way.
    With build (the recipe's pin) and the image's own flag set, a vLLM that is not that build is a warning too.
    """
    overrides = overrides or {}
    known = set(flagset.get("flags") or [])
    where = "the flag set of vLLM %s%s" % (flagset.get("version", "?"),
                                           " in image " + flagset["image_id"][:19] if flagset.get("image_id") else
                                           " shipped with the collection (the image is not on the head yet)")
    vllm = "%s%s" % (flagset.get("version", "?"), " in image " + flagset["image_id"][:19] if flagset.get("image_id") else
                     " (the list shipped with the collection)")
    found = []

    def check_value(flag, shown, val, spec):
        # A type or range is the same in every release of the flag; a choice missing from another release's
        # list may be new, so there only a typo is fatal.
        bad = value_problem(val, spec or {}, vllm)
        if bad:
            reason, what = bad
            found.append({"fatal": bool(strict or what != "choice"), "message": (
                "%s (from %s) %s Fix it there." % (shown, source(flag), reason))})

    def source(flag):
        if flag in overrides:
            return "recipe_overrides (args), set in the inventory or with -e"
        return recipe

    for flag, given in (args or {}).items():
        if given is None or given is False:
            continue  # not rendered
        name = str(flag).replace("_", "-")  # vLLM's parser takes --foo_bar as --foo-bar
        if name not in known:
            close = _closest(name, sorted(known))
            hint = "Did you mean --%s? " % close if close else ""
            found.append({"fatal": bool(strict or close), "message": (
                "--%s (from %s) is not in %s. %sFix or remove it there." % (flag, source(flag), where, hint))})
            continue
        check_value(flag, "--" + str(flag), given, (flagset.get("values") or {}).get(name))
        fields = (flagset.get("json_keys") or {}).get(name)
        if fields and isinstance(given, str):
            # A JSON-valued flag given as text: vLLM parses it at start and refuses what does not parse.
            try:
                given = json.loads(given)
            except ValueError as exc:
                found.append({"fatal": True, "message": (
                    "--%s (from %s) takes JSON, and %r does not parse: %s. Give it as a mapping in YAML, or as valid "
                    "JSON text." % (flag, source(flag), given[:200], exc))})
                continue
        if fields and isinstance(given, dict):
            for key in given:
                if key in fields:
                    check_value(flag, "--%s key '%s'" % (flag, key), given[key],
                                ((flagset.get("json_values") or {}).get(name) or {}).get(key))
                    continue
                close = _closest(str(key), fields)
                hint = "Did you mean '%s'? " % close if close else ""
                found.append({"fatal": bool(strict or close), "message": (
                    "--%s key '%s' (from %s) is not a field vLLM %s takes there. %sFix or remove it there."
                    % (flag, key, source(flag), flagset.get("version", "?"), hint))})
    mismatch = build_problem(flagset.get("version"), build, recipe) if strict else None
    if mismatch:
        found.append({"fatal": False, "message": mismatch})
    return found
