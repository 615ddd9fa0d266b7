"""mypy plugin for this repository's own type check (``[tool.mypy] plugins`` in pyproject.toml).

``kubelet_trio.api.serialize.model`` wraps ``attrs.frozen(kw_only=True)``. It carries
``typing.dataclass_transform``, which is enough for a user's constructor calls, but mypy's special cases
for attrs classes (``attrs.evolve`` keyword checking, ``attrs.fields``) only apply to classes its attrs
plugin built. Registering the decorator as an attrs frozen maker, as attrs documents for wrapped
decorators (https://www.attrs.org/en/stable/extending.html#wrapping-the-decorator), lets the package
check ``attrs.evolve(pod, spec=...)`` against the model's fields. The one thing mypy then does not see is
``kw_only=True``: positional construction is not flagged here (it fails at run time, and the
dataclass_transform view that users get flags it).
"""

from __future__ import annotations

from mypy.plugin import Plugin
from mypy.plugins.attrs import attr_frozen_makers

MODEL_DECORATOR = "kubelet_trio.api.serialize.model"

attr_frozen_makers.add(MODEL_DECORATOR)


class _ModelPlugin(Plugin):
    """Nothing to hook: the registration above is the plugin; this class makes mypy load the module."""


def plugin(version: str) -> type[Plugin]:
    return _ModelPlugin
