"""JSON merge patches (RFC 7386): build the smallest patch from an old to a new document.

The kubelet writes pod and node status with merge patches: objects are merged key by key, ``null``
removes a key, and lists are replaced whole - so a patch carries complete lists (conditions,
container statuses) whenever any element changed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["apply_merge_patch", "merge_patch_diff"]


def merge_patch_diff(old: Any, new: Any) -> Any:
    """The patch that turns ``old`` into ``new`` (``{}`` when they are equal, for objects)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            if isinstance(old[key], dict) and isinstance(value, dict):
                patch[key] = merge_patch_diff(old[key], value)
            else:
                patch[key] = value
    return patch


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 ``MergePatch(target, patch)``; inputs are not modified."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result
