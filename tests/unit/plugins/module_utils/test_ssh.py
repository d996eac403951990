"""The node-to-node SSH command lines."""

import os
import shlex
import shutil
import subprocess

import pytest

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


def test_accept_new_accepts_new_keys_only_and_off_checks_nothing():
    assert opts(_ssh.ssh_base(host_key_checking="accept-new"))["StrictHostKeyChecking"] == "accept-new"
    off = opts(_ssh.ssh_base(host_key_checking="off"))
    assert off["StrictHostKeyChecking"] == "no" and off["UserKnownHostsFile"] == "/dev/null"


def test_empty_key_and_known_hosts_are_node_trusts_own():
    argv = _ssh.ssh_base()
    assert argv[argv.index("-i") + 1] == os.path.expanduser(_ssh.DEFAULT_KEY)
    assert opts(argv)["UserKnownHostsFile"] == os.path.expanduser(_ssh.DEFAULT_KNOWN_HOSTS)


def test_home_replaces_the_tilde_for_another_user_and_a_tilde_home_keeps_it_for_ssh():
    argv = _ssh.ssh_base(key="~/k", home="/home/spark")
    assert argv[argv.index("-i") + 1] == "/home/spark/k"
    assert opts(argv)["UserKnownHostsFile"] == "/home/spark/.ssh/dgxspark_known_hosts"
    argv = _ssh.ssh_base(home="~")
    assert argv[argv.index("-i") + 1] == _ssh.DEFAULT_KEY


def test_module_params_map_onto_the_same_options():
    params = {"ssh_key": "/k", "known_hosts": "", "ssh_port": None, "host_key_checking": "strict", "connect_timeout": 7}
    assert _ssh.from_params(params) == _ssh.ssh_base(key="/k", connect_timeout=7)
    assert set(params) == set(_ssh.ARGUMENT_SPEC)


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


@pytest.mark.skipif(not shutil.which("ssh"), reason="no ssh client here")
def test_the_cipher_preference_is_valid_for_ssh_and_puts_aes_gcm_first():
    # ssh -G only resolves the configuration; nothing connects.
    argv = _ssh.ssh_base()[:1] + ["-G"] + _ssh.ssh_base()[1:] + ["nohost.invalid"]
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    ciphers = next(line.split()[1] for line in res.stdout.splitlines() if line.startswith("ciphers "))
    assert ciphers.split(",")[:2] == ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com"]
    assert "chacha20-poly1305@openssh.com" in ciphers  # the defaults stay, after them


def test_converse_sends_the_second_line_while_the_other_side_runs(tmp_path):
    seen = tmp_path / "first-line-seen"
    script = f'read a; touch {seen}; read b; echo "$a-$b"'

    def later():
        # The other side has the first line before this side sends the second.
        for _ in range(500):
            if seen.exists():
                return "second\n"
            __import__("time").sleep(0.01)
        return "too-late\n"

    res = _ssh.converse(["sh", "-c", script], "first\n", later)
    assert res.returncode == 0 and res.stdout.strip() == "first-second"


def test_converse_with_a_side_that_is_already_gone_reports_its_status():
    res = _ssh.converse(["sh", "-c", "echo refused >&2; exit 255"], "x" * (1 << 20), lambda: "more\n")
    assert res.returncode == 255 and "refused" in res.stderr
