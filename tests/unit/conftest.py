"""Make `ansible_collections.dgxspark.vllm` importable from the working tree."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / ".collections"
if not (COLLECTIONS / "ansible_collections" / "dgxspark" / "vllm").exists():
    raise RuntimeError("run scripts/bootstrap.sh first: it links the collection under .collections/")
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
