"""relay.toml's ``[keymap]``, checked before it is applied: a key that another binding
active at the same time already holds is refused, with both named."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.binding import Binding


def _keys(spec: str) -> list[str]:
    return [key.strip() for key in spec.split(",") if key.strip()]


def effective_keys(binding: Binding, keymap: Mapping[str, str]) -> list[str]:
    if binding.id and binding.id in keymap:
        return _keys(keymap[binding.id])
    return [binding.key]


def clash(
    binding_id: str, keymap: Mapping[str, str], groups: Sequence[Sequence[Binding]]
) -> tuple[str, Binding] | None:
    """The first key of ``binding_id``'s new keys that another binding of one of its groups
    holds (with the keymap applied), and that binding."""
    wanted = set(_keys(keymap[binding_id]))
    for group in groups:
        if not any(b.id == binding_id for b in group):
            continue
        for other in group:
            if other.id == binding_id:
                continue
            for key in effective_keys(other, keymap):
                if key in wanted:
                    return key, other
    return None


def checked_keymap(
    keymap: Mapping[str, str], groups: Sequence[Sequence[Binding]]
) -> tuple[dict[str, str], list[str]]:
    """The entries that can be applied, and one sentence per refused entry."""
    accepted = dict(keymap)
    refusals = []
    for binding_id in list(keymap):
        found = clash(binding_id, accepted, groups)
        if found is None:
            continue
        key, other = found
        del accepted[binding_id]
        refusals.append(
            f'[keymap] {binding_id} = "{keymap[binding_id]}" refused: {key} is already '
            f"{other.description} ({other.id}). Remap {other.id} too, or pick another key; "
            f"{binding_id} keeps its own key."
        )
    return accepted, refusals
