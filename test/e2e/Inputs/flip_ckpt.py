"""Flips bytes of a MindSpore checkpoint where its structure is (record
tags and lengths, tensor names, types, dims) and runs a command on each
copy: every run must end with success or an error naming a tensor, never a
crash. Usage: flip_ckpt.py IN.ckpt WORK_DIR COMMAND... (COMMAND's {} is the
flipped file)."""
import subprocess
import sys


def varint_at(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        shift += 7
        i += 1
        if not byte & 0x80:
            return value, i


source, work, command = sys.argv[1], sys.argv[2], sys.argv[3:]
data = open(source, "rb").read()
# Structural offsets of the first records: outer tag, outer length, the
# tag's length, a byte of the name, the tensor header.
positions = []
offset = 0
while offset < len(data) and len(positions) < 40:
    _, body = varint_at(data, offset + 1)
    length, _ = varint_at(data, offset + 1)
    positions += [offset, offset + 1, body + 1, body + 3, body + 2 + data[body + 1],
                  body + 4 + data[body + 1], body + 6 + data[body + 1]]
    offset = body + length
crashes = named = succeeded = 0
for index, position in enumerate(sorted(set(p for p in positions if p < len(data)))):
    for mask in (0x01, 0x80, 0xFF):
        flipped = bytearray(data)
        flipped[position] ^= mask
        path = f"{work}/flip{index}-{mask}.ckpt"
        open(path, "wb").write(flipped)
        run = subprocess.run([a.replace("{}", path) for a in command],
                             capture_output=True, text=True, errors="replace")
        if run.returncode == 0:
            succeeded += 1
        elif run.returncode in (1, 65, 66) and ("tensor '" in run.stderr or
                                               "(the first value)" in run.stderr):
            named += 1
        else:
            crashes += 1
            print(f"byte {position} ^ {mask:#x}: exit {run.returncode}: {run.stderr.strip()}")
print(f"{named + succeeded + crashes} flips: {named} errors naming a tensor, "
      f"{succeeded} runs, {crashes} others")
