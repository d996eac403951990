"""DUMP_SCRIPT, run by a real Python against a small package laid out as vLLM's: what it reads of each flag."""
import subprocess
import sys
import textwrap

from ansible_collections.dgxspark.vllm.plugins.module_utils import _vllm_flags

FAKE_VLLM = {
    "vllm/__init__.py": "__version__ = '0.0.test'\n",
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": "from argparse import ArgumentParser as FlexibleArgumentParser\n",
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/openai/__init__.py": "",
    "vllm/entrypoints/openai/cli_args.py": textwrap.dedent("""
        def human(text):
            return int(text[:-1]) * 1000 if text[-1:] in "kK" else int(text)
        def optional_int(text):
            return None if text == "None" else int(text)
        def make_arg_parser(parser):
            parser.add_argument("--max-num-seqs", type=optional_int)
            parser.add_argument("--gpu-memory-utilization", type=float)
            parser.add_argument("--max-model-len", type=human)
            parser.add_argument("--kv-cache-dtype", choices=["auto", "fp8"])
            parser.add_argument("--enforce-eager", action="store_true")
            parser.add_argument("--served-model-name", nargs="+")
            parser.add_argument("--speculative-config", type=str)
            parser.add_argument("--block-size", type=int)
            return parser
        """),
    # Pydantic keeps a field's declared bounds as metadata objects with gt/ge/lt/le attributes.
    "vllm/config.py": textwrap.dedent("""
        import dataclasses
        class Bound:
            def __init__(self, **kw):
                self.__dict__.update(kw)
        class Info:
            def __init__(self, *metadata):
                self.metadata = list(metadata)
        @dataclasses.dataclass
        class SchedulerConfig:
            max_num_seqs: int = 128
        SchedulerConfig.__pydantic_fields__ = {"max_num_seqs": Info(Bound(ge=1))}
        @dataclasses.dataclass
        class CacheConfig:
            gpu_memory_utilization: float = 0.9
            block_size: int = 16
        CacheConfig.__pydantic_fields__ = {"gpu_memory_utilization": Info(Bound(gt=0), Bound(le=1)),
                                           "block_size": Info(Bound(ge=1))}
        @dataclasses.dataclass
        class OtherConfig:
            block_size: int = 16
        OtherConfig.__pydantic_fields__ = {"block_size": Info(Bound(ge=8))}
        @dataclasses.dataclass
        class SpeculativeConfig:
            method: str = ""
            num_speculative_tokens: int = 1
        SpeculativeConfig.__pydantic_fields__ = {"method": Info(), "num_speculative_tokens": Info(Bound(gt=0))}
        """),
}


def dump(tmp_path):
    for name, text in FAKE_VLLM.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    run = subprocess.run([sys.executable, "-c", _vllm_flags.DUMP_SCRIPT], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(tmp_path)}, check=False, timeout=60)
    assert run.returncode == 0, run.stderr
    return _vllm_flags.parse_dump(run.stdout)


def test_each_flag_gets_its_converter_its_choices_and_its_config_class_bounds(tmp_path):
    found = dump(tmp_path)
    assert found["version"] == "0.0.test" and found["format"] == _vllm_flags.FORMAT
    values = found["values"]
    assert values["max-num-seqs"] == {"type": "int", "config": "SchedulerConfig", "ge": 1}
    assert values["gpu-memory-utilization"] == {"type": "float", "config": "CacheConfig", "gt": 0, "le": 1}
    assert values["kv-cache-dtype"] == {"choices": ["auto", "fp8"]}
    # A converter that takes more than numbers ("128k") is left to vLLM; a flag without a value has nothing to check.
    assert "max-model-len" not in values and "enforce-eager" not in values
    # Two classes declaring other bounds on a field of that name: which one the flag fills is not known, so neither.
    assert values["block-size"] == {"type": "int"}
    assert found["json_keys"]["speculative-config"] == ["method", "num_speculative_tokens"]
    assert found["json_values"] == {"speculative-config": {"num_speculative_tokens": {"gt": 0, "config": "SpeculativeConfig"}}}


def test_what_it_reads_refuses_what_vllm_would(tmp_path):
    flagset = dict(dump(tmp_path), image_id="sha256:" + "12" * 32)
    found = _vllm_flags.problems({"max-num-seqs": 0, "gpu-memory-utilization": "1.2", "kv-cache-dtype": "fp8",
                                  "speculative-config": {"method": "x", "num_speculative_tokens": -1}}, flagset)
    assert [f["message"].split(" (from")[0] for f in found] == [
        "--max-num-seqs", "--gpu-memory-utilization", "--speculative-config key 'num_speculative_tokens'"]


def test_no_nccl_in_a_cpu_build(tmp_path):
    assert dump(tmp_path)["nccl"] == {"version": None, "file": None, "so_path_env": None}


def test_the_nccl_wheel_pip_installed_is_named_with_its_file(tmp_path):
    # torch's CUDA build would map the wheel's libnccl; without one here, the wheel's own record names it.
    info = tmp_path / "nvidia_nccl_cu13-2.28.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: 2.28.9\n")
    (info / "RECORD").write_text("nvidia/nccl/lib/libnccl.so.2,,\n")
    (tmp_path / "nvidia" / "nccl" / "lib").mkdir(parents=True)
    (tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2").write_bytes(b"")
    found = dump(tmp_path)["nccl"]
    assert found["version"] == "2.28.9" and found["file"] == str(tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2")


def test_the_nccl_is_read_alone_where_vllm_is_not_there(tmp_path):
    # The same wheel as above, in a folder with no vLLM: NCCL_SCRIPT, which vllm_flags runs when the dump fails.
    info = tmp_path / "nvidia_nccl_cu13-2.28.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: 2.28.9\n")
    (info / "RECORD").write_text("nvidia/nccl/lib/libnccl.so.2,,\n")
    (tmp_path / "nvidia" / "nccl" / "lib").mkdir(parents=True)
    (tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2").write_bytes(b"")
    run = subprocess.run([sys.executable, "-c", _vllm_flags.NCCL_SCRIPT], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    found = _vllm_flags.parse_nccl(run.stdout)
    assert found["version"] == "2.28.9" and found["file"] == str(tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
