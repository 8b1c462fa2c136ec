"""The ``payload.interaction`` decoder, held to generated input: it never raises, accepts
exactly the shape ``{instanceId, componentKey, event, value?}`` and keeps what it accepts."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.protocol import ComponentInteractEvent
from agentskit_chat.protocol._types import thaw
from agentskit_chat.server._chat_interactions import interaction_request
from tests._strategies import MARKER, deep, json_values

safe_ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,30}\Z")
names = st.from_regex(r"\A[a-z][a-z0-9-]{0,30}\Z")
#: Bounded JSON: what a form, a button or a link may carry.
plain_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**53), max_value=2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def submitted(body: object) -> dict[str, Any]:
    return {"payload": {"input": "x", "interaction": body}}


@given(
    instance_id=safe_ids,
    key=names,
    event=names,
    value=st.one_of(st.just(None), plain_values).map(lambda v: ("value", v)) | st.just(None),
    extra=st.dictionaries(st.sampled_from(["protocol", "type", MARKER]), json_values, max_size=2),
)
def test_a_well_formed_interaction_decodes_to_exactly_what_was_sent(
    instance_id: str,
    key: str,
    event: str,
    value: tuple[str, Any] | None,
    extra: dict[str, Any],
) -> None:
    body: dict[str, Any] = {**extra, "instanceId": instance_id, "componentKey": key, "event": event}
    if value is not None:
        body["value"] = value[1]
    decoded = interaction_request(submitted(body))
    assert isinstance(decoded, ComponentInteractEvent)
    assert (decoded.instance_id, decoded.component_key, decoded.event) == (instance_id, key, event)
    assert decoded.has_value is (value is not None)
    if value is not None:
        assert thaw(decoded.value) == value[1]
    # Unknown keys are dropped, and the envelope is the protocol's own.
    wire = decoded.to_wire()
    assert MARKER not in wire
    assert (wire["protocol"], wire["version"], wire["type"]) == (
        "agentskit.chat.component",
        1,
        "interact",
    )
    again = {k: v for k, v in wire.items() if k not in ("protocol", "version", "type")}
    assert interaction_request(submitted(again)) == decoded


@given(body=json_values)
def test_any_value_decodes_to_an_event_or_false_and_never_raises(body: Any) -> None:
    decoded = interaction_request(submitted(body))
    assert decoded is False or isinstance(decoded, ComponentInteractEvent)
    if isinstance(decoded, ComponentInteractEvent):
        assert isinstance(body, dict)
        assert (decoded.instance_id, decoded.component_key, decoded.event) == (
            body["instanceId"],
            body["componentKey"],
            body["event"],
        )


@given(
    body=st.fixed_dictionaries(
        {"instanceId": safe_ids, "componentKey": names, "event": names},
        optional={"value": json_values},
    ),
    spoil=st.sampled_from(
        [
            ("instanceId", "bad id"),
            ("instanceId", ""),
            ("componentKey", "Form"),
            ("event", "Submit Now"),
            ("event", None),
            ("value", deep(21)),
            ("value", float("inf")),
            ("value", "x" * 16385),
        ]
    ),
)
def test_one_bad_field_refuses_the_whole_interaction(
    body: dict[str, Any], spoil: tuple[str, Any]
) -> None:
    field, bad = spoil
    assert interaction_request(submitted({**body, field: bad})) is False


def test_a_submission_without_the_key_has_no_interaction() -> None:
    assert interaction_request({"payload": {"input": "x"}}) is None
    assert interaction_request({"payload": "x"}) is None
    assert interaction_request(["payload"]) is None
    assert interaction_request(submitted(None)) is False
    assert interaction_request(submitted([])) is False
