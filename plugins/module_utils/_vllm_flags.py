# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The flags a vLLM accepts, read from its own argument parser, and the rendered flags checked against them."""
from __future__ import annotations

import difflib
import json
import re

# Runs inside the image with its own Python: vLLM's `serve` parser and the config classes whose JSON
# flags vLLM validates key by key. The parser's module moved between releases; both places are tried.
DUMP_SCRIPT = r"""
import dataclasses, importlib, json
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
keys = {}
for flag, name in (("speculative-config", "SpeculativeConfig"), ("compilation-config", "CompilationConfig"),
                   ("attention-config", "AttentionConfig")):
    cls = getattr(cfg, name, None)
    if cls is not None and dataclasses.is_dataclass(cls):
        keys[flag] = sorted(f.name for f in dataclasses.fields(cls))
print("DGXSPARK-VLLM-FLAGS " + json.dumps({"version": vllm.__version__, "flags": flags, "json_keys": keys}))
"""
MARK = "DGXSPARK-VLLM-FLAGS "


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


def problems(args, flagset, strict=True, overrides=None, recipe="the recipe", build=None):
    """Rendered flags (name -> value, as the serve role renders them) that the flag set does not know.

    Each problem: message, fatal. With strict (the image's own flag set) every unknown flag or JSON
    key is fatal; otherwise (a shipped list of another release) only those with a close known match,
    which are typos, are fatal and the rest warnings. With build (the recipe's pin) and the image's own flag set,
    a vLLM that is not that build is a warning too.
    """
    overrides = overrides or {}
    known = set(flagset.get("flags") or [])
    where = "the flag set of vLLM %s%s" % (flagset.get("version", "?"),
                                           " in image " + flagset["image_id"][:19] if flagset.get("image_id") else
                                           " shipped with the collection (the image is not on the head yet)")
    found = []

    def source(flag):
        if flag in overrides:
            return "serve_recipe_overrides (args), set in the inventory or with -e"
        return recipe

    for flag, value in (args or {}).items():
        if value is None or value is False:
            continue  # not rendered
        name = str(flag).replace("_", "-")  # vLLM's parser takes --foo_bar as --foo-bar
        if name not in known:
            close = _closest(name, sorted(known))
            hint = "Did you mean --%s? " % close if close else ""
            found.append({"fatal": bool(strict or close), "message": (
                "--%s (from %s) is not in %s. %sFix or remove it there." % (flag, source(flag), where, hint))})
            continue
        fields = (flagset.get("json_keys") or {}).get(name)
        if fields and isinstance(value, str):
            # A JSON-valued flag given as text: vLLM parses it at start and refuses what does not parse.
            try:
                value = json.loads(value)
            except ValueError as exc:
                found.append({"fatal": True, "message": (
                    "--%s (from %s) takes JSON, and %r does not parse: %s. Give it as a mapping in YAML, or as valid "
                    "JSON text." % (flag, source(flag), value[:200], exc))})
                continue
        if fields and isinstance(value, dict):
            for key in value:
                if key in fields:
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
