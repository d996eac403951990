"""scripts/playbook_runs.py reads the headers serving_checks.keep_run writes."""
import importlib.util
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "playbook_runs.py"


def _module():
    spec = importlib.util.spec_from_file_location("playbook_runs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_kept_runs_headers_are_read_with_and_without_their_cpu(tmp_path):
    (tmp_path / "serve").mkdir()
    (tmp_path / "serve" / "01-test_a.log").write_text(
        "# ansible-playbook site.yml --tags serve\n# exit 0 after 41 s, 12.5 s of controller CPU\nPLAY [x]\n")
    (tmp_path / "serve" / "02-test_b.log").write_text("# ansible-playbook site.yml\n# exit 2 after 10 s\n")
    (tmp_path / "serve" / "03-broken.log").write_text("not a kept run\n")
    assert _module().runs(tmp_path) == [("serve", "01-test_a", "site.yml --tags serve", 0, 41, 12.5),
                                        ("serve", "02-test_b", "site.yml", 2, 10, None)]
