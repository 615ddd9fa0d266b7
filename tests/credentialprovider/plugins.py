"""Credential provider plugins for tests: small Python scripts written to a bin directory.

Each script records its call (request, argv, one environment variable) in ``calls.jsonl`` beside it,
then runs its body with ``request`` (the decoded request) and ``respond(**fields)`` (prints a
``CredentialProviderResponse`` of the request's apiVersion) in scope.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

V1 = "credentialprovider.kubelet.k8s.io/v1"

_PRELUDE = """\
#!{python}
import json, os, sys, time
request = json.loads(sys.stdin.read())
call = {{"request": request, "argv": sys.argv[1:], "mode": os.environ.get("PLUGIN_MODE")}}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl"), "a") as log:
    log.write(json.dumps(call) + "\\n")

def respond(**fields):
    print(json.dumps({{"kind": "CredentialProviderResponse", "apiVersion": request["apiVersion"], **fields}}))

"""


def write_plugin(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(_PRELUDE.format(python=sys.executable) + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def calls(bin_dir: Path) -> list[dict[str, Any]]:
    log = bin_dir / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def config_yaml(*providers: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": "kubelet.config.k8s.io/v1",
            "kind": "CredentialProviderConfig",
            "providers": list(providers),
        }
    )


def provider(
    name: str, match_images: list[str], default_cache_duration: str = "0s", **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "matchImages": match_images,
        "defaultCacheDuration": default_cache_duration,
        "apiVersion": V1,
        **extra,
    }
