"""What loading the settings reports: an invalid setting (an error) or something worth a warning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["IGNORED_KEYS", "NOT_ENFORCED", "OptionsError", "OptionsWarning"]


class OptionsError(ValueError):
    """An invalid flag, file or value; the message names it. The CLI exits with status 2."""


@attrs.frozen
class OptionsWarning:
    """Something about the configuration worth a warning, logged once logging is set up: a constant
    message and its values as data."""

    message: str
    fields: Mapping[str, Any] = attrs.Factory(dict)


#: The message of the warning for a security-relevant setting that asks for a protection not enforced.
NOT_ENFORCED = "security-relevant setting is NOT enforced by kubelet-trio"
#: The message of the one warning naming the configuration keys that are read but not used.
IGNORED_KEYS = "ignoring unknown or unsupported configuration keys"
