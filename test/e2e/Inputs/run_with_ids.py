"""Runs a command with `--input-ids` set to the comma-separated ids in a
file (lit's shell has no command substitution).
Usage: run_with_ids.py IDS_FILE COMMAND..."""
import subprocess
import sys

ids = open(sys.argv[1]).read().strip()
sys.exit(subprocess.run(sys.argv[2:] + ["--input-ids", ids]).returncode)
