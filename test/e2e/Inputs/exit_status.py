"""Runs a command and prints its exit status ("exit N"), its output
discarded: for tests of what a failure's status says.
Usage: exit_status.py COMMAND [ARGS...]"""
import subprocess
import sys

status = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(f"exit {status}")
