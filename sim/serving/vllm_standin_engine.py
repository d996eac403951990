"""Stand-in for the vLLM engine in the sim's serving test image (filled in by the serving work)."""
import sys

if __name__ == "__main__":
    print("vllm stand-in engine: not implemented yet", file=sys.stderr)
    sys.exit(2)
