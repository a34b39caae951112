"""Renders every template with every message list and variable set through
mf-tokenize --render-template and through jinja2 (Hugging Face's
environment, test/reference/render_chat_template.py), and counts equal
results (output and whether rendering failed).
Usage: compare_renderers.py MF_TOKENIZE --templates T... --messages M... --variables V..."""
import os
import subprocess
import sys

args = sys.argv[1:]
tool = args.pop(0)
groups, current = {}, None
for arg in args:
    if arg.startswith("--"):
        current = groups.setdefault(arg[2:], [])
    else:
        current.append(arg)
reference = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                         "reference", "render_chat_template.py")
same = total = 0
for template in groups["templates"]:
    for messages in groups["messages"]:
        for variables in groups["variables"]:
            total += 1
            ours = subprocess.run([tool, "--render-template", template, "--messages", messages,
                                   "--variables", variables], capture_output=True)
            theirs = subprocess.run(["/usr/bin/python3", reference, template, messages, variables],
                                    capture_output=True)
            if ours.stdout == theirs.stdout and (ours.returncode == 0) == (theirs.returncode == 0):
                same += 1
            else:
                print(f"differs: {template} {messages} {variables}\n"
                      f"  mfc ({ours.returncode}): {ours.stdout[:300]!r} {ours.stderr[:200]!r}\n"
                      f"  jinja2 ({theirs.returncode}): {theirs.stdout[:300]!r}")
print(f"{same} of {total} renderings equal jinja2's")
