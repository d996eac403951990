"""The node-to-node SSH command lines."""

import os
import shlex

from ansible_collections.dgxspark.vllm.plugins.module_utils import _ssh


def opts(argv):
    """The -o options of an argv as a dict."""
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-o")


def test_strict_by_default_with_key_and_known_hosts():
    argv = _ssh.ssh_argv("10.0.0.2", ["docker", "load"], user="spark",
                         key="~/.ssh/k", known_hosts="~/.ssh/kh", port=2222)
    o = opts(argv)
    assert o["StrictHostKeyChecking"] == "yes"
    assert o["BatchMode"] == "yes"
    assert o["UserKnownHostsFile"] == os.path.expanduser("~/.ssh/kh")
    assert o["IdentitiesOnly"] == "yes"
    assert argv[argv.index("-i") + 1] == os.path.expanduser("~/.ssh/k")
    assert argv[argv.index("-p") + 1] == "2222"
    # destination after "--", then one command string
    assert argv[-3:] == ["--", "spark@10.0.0.2", "docker load"]


def test_not_strict_accepts_new_keys_only():
    assert opts(_ssh.ssh_base(strict=False))["StrictHostKeyChecking"] == "accept-new"


def test_command_words_are_quoted_for_the_remote_shell():
    argv = _ssh.ssh_argv("h", ["docker", "image", "inspect", "--format", "{{.Id}}", "a b"])
    assert shlex.split(argv[-1]) == ["docker", "image", "inspect", "--format", "{{.Id}}", "a b"]
    assert argv[-2] == "h"


def test_string_command_is_passed_as_is():
    assert _ssh.ssh_argv("h", "zstd -dc | docker load")[-1] == "zstd -dc | docker load"


def test_rsync_rsh_is_the_same_ssh_without_destination():
    rsh = shlex.split(_ssh.rsync_rsh(key="/k", known_hosts="/kh"))
    assert rsh == _ssh.ssh_base(key="/k", known_hosts="/kh")
    assert rsh[0] == "ssh" and "--" not in rsh
