"""Renders a chat template the way Hugging Face's apply_chat_template does
(jinja2's ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks,
tojson as json.dumps(ensure_ascii=False), raise_exception), for comparing
mfc's renderer with Debian's python3-jinja2.
Usage: render_chat_template.py TEMPLATE MESSAGES.json [VARIABLES.json]
TEMPLATE is a file, or a tokenizer_config.json whose chat_template is used."""
import json
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


source_path, messages_path = sys.argv[1], sys.argv[2]
source = open(source_path, encoding="utf-8").read()
if source_path.endswith(".json"):
    source = json.loads(source)["chat_template"]
environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
environment.filters["tojson"] = tojson
environment.globals["raise_exception"] = raise_exception
variables = json.load(open(sys.argv[3])) if len(sys.argv) > 3 else {}
messages = json.load(open(messages_path, encoding="utf-8"))
sys.stdout.write(environment.from_string(source).render(messages=messages, **variables))
