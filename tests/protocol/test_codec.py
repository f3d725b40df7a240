"""Codec round trips for every topic and every kind of bad input."""

import math

import msgpack
import numpy as np
import pytest

from errors import MessageError
from protocol import codec
from protocol.messages import FULL_RATE_SUFFIX, MAX_PAYLOAD_BYTES, SCHEMAS, TopicSchema, register_schema, schema_for
from protocol.registry import BUILTIN, producer

rng = np.random.default_rng(3)


def _value(ftype, shape):
    if ftype == "f8":
        return float(rng.normal()) if shape == () else rng.normal(size=shape)
    return {"int": -(1 << 40), "bool": True, "str": "auto sequence", "list[str]": ["a", "b"],
            "map": {"tx": 3, "rate": 0.5, "port": "/dev/ttyUSB0", "ok": False},
            "events": [{"kind": "capture", "t": 1.5, "who": ["arm"]}, {"kind": "latch"}]}[ftype]


def _fields(topic):
    return {k: _value(*spec) for k, spec in SCHEMAS[topic].fields.items()}


def _enc(topic, fields, **kw):
    env = dict(sender="svc", seq=7, t_ns=-5, h_ns=1_000_000, wall_ns=123)
    env.update(kw)
    return codec.encode(topic, fields, **env)


@pytest.mark.parametrize("topic", sorted(SCHEMAS))
def test_round_trip_every_topic(topic):
    fields = _fields(topic)
    s = codec.decode(topic, _enc(topic, fields))
    assert (s.t_ns, s.h_ns, s.sender, s.seq, s.wall_ns) == (-5, 1_000_000, "svc", 7, 123)
    assert set(s.body) == set(fields)
    for k, v in fields.items():
        if isinstance(v, np.ndarray):
            assert s.body[k].shape == v.shape and np.array_equal(s.body[k], v)  # bit exact
            assert not s.body[k].flags.writeable
        else:
            assert s.body[k] == v
    assert codec.envelope(topic, _enc(topic, fields)) == (SCHEMAS[topic].version, "svc", 7, -5, 1_000_000, 123)


def test_schema_names_are_distinct_and_dotted():
    """Every shipped topic's schema name is berthsim's and no two shipped topics share one; a topic registered since
    (a plug-in kind's, or one a configuration made, as an FMU service's, named after its service) takes no shipped
    topic's name. Two configurations loaded in one process (two tests) may each name a service the same: their
    topics' schemas then share that name, as in their runs they never meet."""
    base = {t: s for t, s in SCHEMAS.items() if not t.endswith(FULL_RATE_SUFFIX)}
    shipped = {t: s.name for t, s in base.items() if t.startswith("sim/") or producer(t) in BUILTIN}
    names = list(shipped.values())
    assert len(names) >= 13 and len(set(names)) == len(names) and all(n.startswith("berthsim.") for n in names)
    assert not {s.name for t, s in base.items() if t not in shipped} & set(names)


def test_every_state_and_flow_topic_has_its_full_rate_twin():
    for topic, schema in SCHEMAS.items():
        if topic.endswith(FULL_RATE_SUFFIX):
            assert SCHEMAS[topic[: -len(FULL_RATE_SUFFIX)]] is schema
        elif schema.kind != "event" and not topic.startswith("sim/"):
            assert SCHEMAS[topic + FULL_RATE_SUFFIX] is schema


def _raw(topic, fields, version=None, env=None):
    body = {}
    c = SCHEMAS[topic]
    for k, v in fields.items():
        body[k] = v.astype("<f8").tobytes() if isinstance(v, np.ndarray) else v
    e = [c.version if version is None else version, "svc", 1, 0, 10, 0, body]
    if env:
        e = env(e)
    return msgpack.packb(e, use_bin_type=True)


BAD = {
    "random bytes": lambda: bytes(rng.integers(0, 256, 64, dtype=np.uint8)),
    "empty": lambda: b"",
    "not an array": lambda: msgpack.packb({"a": 1}),
    "short envelope": lambda: msgpack.packb([1, "svc", 1]),
    "wrong version": lambda: _raw("arm/wrench", _fields("arm/wrench"), version=99),
    "empty sender": lambda: _raw("arm/wrench", _fields("arm/wrench"), env=lambda e: e[:1] + [""] + e[2:]),
    "negative seq": lambda: _raw("arm/wrench", _fields("arm/wrench"), env=lambda e: e[:2] + [-1] + e[3:]),
    "zero period": lambda: _raw("arm/wrench", _fields("arm/wrench"), env=lambda e: e[:4] + [0] + e[5:]),
    "float t_ns": lambda: _raw("arm/wrench", _fields("arm/wrench"), env=lambda e: e[:3] + [1.0] + e[4:]),
    "missing field": lambda: _raw("arm/wrench", {k: v for k, v in _fields("arm/wrench").items() if k != "grappled"}),
    "unknown field": lambda: _raw("arm/wrench", {**_fields("arm/wrench"), "extra": 1}),
    "wrong shape": lambda: _raw("arm/wrench", {**_fields("arm/wrench"), "F_Eo_W": np.zeros(5)}),
    "NaN": lambda: _raw("arm/wrench", {**_fields("arm/wrench"), "F_Eo_W": np.array([0, 0, math.nan, 0, 0, 0.0])}),
    "inf": lambda: _raw("arm/wrench", {**_fields("arm/wrench"), "p_WoEo_W": np.array([0, math.inf, 0.0])}),
    "list not bin": lambda: _raw("arm/wrench", {**_fields("arm/wrench"), "F_Eo_W": [0.0] * 6}),
    "int for bool": lambda: _raw("arm/wrench", {**_fields("arm/wrench"), "grappled": 1}),
    "NaN scalar": lambda: _raw("hil/feedback", {**_fields("hil/feedback"), "delay_s": math.nan}),
    "event without kind": lambda: _raw("contact/event", {"events": [{"what": "x"}]}),
    "oversize": lambda: b"\x00" * (MAX_PAYLOAD_BYTES + 1),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_message_error_naming_topic(case):
    topic = "hil/feedback" if "scalar" in case else "contact/event" if "event" in case else "arm/wrench"
    with pytest.raises(MessageError, match=topic):
        codec.decode(topic, BAD[case]())


def test_error_names_field_and_value():
    with pytest.raises(MessageError, match=r"F_Eo_W.*not finite.*nan"):
        codec.decode("arm/wrench", BAD["NaN"]())
    with pytest.raises(MessageError, match=r"version.*99"):
        codec.decode("arm/wrench", BAD["wrong version"]())


def test_unknown_topic():
    with pytest.raises(MessageError, match="no/such"):
        codec.decode("no/such", b"")
    with pytest.raises(MessageError, match="no/such"):
        schema_for("no/such")


def test_encode_validates():
    f = _fields("arm/wrench")
    with pytest.raises(MessageError, match="F_Eo_W"):
        _enc("arm/wrench", {**f, "F_Eo_W": [1.0, math.nan, 0, 0, 0, 0]})
    with pytest.raises(MessageError, match="F_Eo_W"):
        _enc("arm/wrench", {**f, "F_Eo_W": np.zeros((2, 3))})
    with pytest.raises(MessageError, match="grappled"):
        _enc("arm/wrench", {k: v for k, v in f.items() if k != "grappled"})
    with pytest.raises(MessageError, match="bogus"):
        _enc("arm/wrench", {**f, "bogus": 1.0})
    with pytest.raises(MessageError, match="h_ns"):
        _enc("arm/wrench", f, h_ns=0)


def test_numpy_scalars_accepted_on_encode():
    f = {**_fields("hil/status"), "faults": np.int64(3)}
    assert codec.decode("hil/status", _enc("hil/status", f)).body["faults"] == 3
    f = {**_fields("payload/state"), "grappled": np.bool_(True)}
    assert codec.decode("payload/state", _enc("payload/state", f)).body["grappled"] is True


def test_register_schema_extends_table():
    register_schema("test/x", TopicSchema("berthsim.TestX", 2, "flow", {"f": ("f8", (2,)), "n": ("int", ())}))
    s = codec.decode("test/x", _enc("test/x", {"f": [1.0, 2.0], "n": 4}))
    assert s.body["n"] == 4 and s.body["f"].tolist() == [1.0, 2.0]
    register_schema("test/x", TopicSchema("berthsim.TestX", 3, "flow", {"f": ("f8", (2,)), "n": ("int", ())}))
    with pytest.raises(MessageError, match="version"):
        codec.decode("test/x", msgpack.packb([2, "a", 0, 0, 1, 0, {"f": b"\0" * 16, "n": 1}]))
    with pytest.raises(MessageError):
        TopicSchema("x", 1, "bogus", {})
    with pytest.raises(MessageError):
        TopicSchema("x", 1, "state", {"a": ("int", (3,))})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_every_array_element_is_checked_and_the_field_named(bad):
    """arm/state has nine array fields, validated together: a non-finite value anywhere is refused."""
    fields = _fields("arm/state")
    arrays = [k for k, (t, shape) in SCHEMAS["arm/state"].fields.items() if t == "f8" and shape != ()]
    assert len(arrays) == 9
    for name in arrays:
        for i in range(fields[name].size):
            v = fields[name].copy()
            v.flat[i] = bad
            with pytest.raises(MessageError, match=f"arm/state.*'{name}'.*not finite"):
                codec.decode("arm/state", _raw("arm/state", {**fields, name: v}))
            with pytest.raises(MessageError, match=f"arm/state.*'{name}'.*not finite"):
                _enc("arm/state", {**fields, name: v})


def test_extreme_finite_values_pass_bit_exact():
    """Largest, smallest and subnormal doubles are finite: accepted and returned unchanged."""
    f = _fields("arm/state")
    f["loads"] = np.full((9, 6), 1.7976931348623157e308)
    f["loads"][0, :3] = (-1.7976931348623157e308, 5e-324, -0.0)
    s = codec.decode("arm/state", _enc("arm/state", f))
    assert s.body["loads"].tobytes() == f["loads"].tobytes() and list(s.body) == list(SCHEMAS["arm/state"].fields)


def test_wrong_length_bins_refused_even_when_the_total_matches():
    f = {**_fields("arm/wrench")}
    raw = _raw("arm/wrench", f)
    env = msgpack.unpackb(raw, raw=False)
    env[6]["F_Eo_W"], env[6]["F_So_W"] = env[6]["F_Eo_W"][:40], env[6]["F_So_W"] + env[6]["F_Eo_W"][40:]
    with pytest.raises(MessageError, match="F_Eo_W.*48 bytes"):
        codec.decode("arm/wrench", msgpack.packb(env, use_bin_type=True))


@pytest.mark.parametrize("topic", sorted(SCHEMAS))
def test_topic_codec_gives_the_bytes_and_samples_of_encode_and_decode(topic):
    f = _fields(topic)
    c = codec.topic_codec(topic)
    raw = c.encode(f, "svc", 7, -5, 1_000_000, 123)
    assert raw == _enc(topic, f) == msgpack.packb([SCHEMAS[topic].version, "svc", 7, -5, 1_000_000, 123,
                                                    msgpack.unpackb(raw, raw=False)[6]], use_bin_type=True)
    a, b = c.decode(raw), codec.decode(topic, raw)
    assert a[:4] == b[:4] and a.wall_ns == b.wall_ns and list(a.body) == list(b.body) == list(SCHEMAS[topic].fields)
    for k, v in a.body.items():
        assert type(v) is type(b.body[k])
        if isinstance(v, np.ndarray):
            assert v.shape == b.body[k].shape and v.tobytes() == b.body[k].tobytes() and not v.flags.writeable
        else:
            assert v == b.body[k]
    with pytest.raises(MessageError, match=f"{topic}.*version"):
        c.decode(msgpack.packb([99, "svc", 0, 0, 1, 0, {}]))
    with pytest.raises(MessageError, match=f"{topic}.*sender"):
        c.encode(f, "", 0, 0, 1)


def test_topic_codec_follows_a_re_registered_schema():
    register_schema("test/y", TopicSchema("berthsim.TestY", 1, "state", {"a": ("f8", ())}))
    c1 = codec.topic_codec("test/y")
    assert codec.topic_codec("test/y") is c1
    register_schema("test/y", TopicSchema("berthsim.TestY", 2, "state", {"a": ("f8", ()), "b": ("int", ())}))
    c2 = codec.topic_codec("test/y")
    assert c2 is not c1 and c2.version == 2
    assert codec.decode("test/y", _enc("test/y", {"a": 1.0, "b": 2})).body == {"a": 1.0, "b": 2}
    with pytest.raises(MessageError, match="test/y.*'b'.*missing"):
        _enc("test/y", {"a": 1.0})


def test_decode_body_in_schema_order_whatever_the_wire_order():
    """A sender may write the fields in any order: the body is in schema order, checked the same."""
    f = _fields("arm/state")
    env = msgpack.unpackb(_raw("arm/state", f), raw=False)
    env[6] = dict(reversed(list(env[6].items())))
    s = codec.decode("arm/state", msgpack.packb(env, use_bin_type=True))
    assert list(s.body) == list(SCHEMAS["arm/state"].fields)
    assert s.body["loads"].tobytes() == f["loads"].tobytes() and s.body["loads"].shape == (9, 6)
    assert s.body["warnings"] == f["warnings"] and s.body["sigma_min"] == f["sigma_min"]
    bad = dict(env[6])
    bad["sigma_min"] = math.nan
    env[6] = bad
    with pytest.raises(MessageError, match="arm/state.*'sigma_min'.*finite"):
        codec.decode("arm/state", msgpack.packb(env, use_bin_type=True))
    del bad["sigma_min"]
    bad["sigma_max"] = 1.0
    with pytest.raises(MessageError, match="arm/state.*'sigma_min'.*missing"):
        codec.decode("arm/state", msgpack.packb(env, use_bin_type=True))


def test_decoded_ints_become_floats_and_lists_are_copied():
    """Scalar conversions of decode (int to float, a str list copied) also apply on the fast path."""
    s = codec.decode("hil/feedback", _raw("hil/feedback", {**_fields("hil/feedback"), "delay_s": 3}))
    assert type(s.body["delay_s"]) is float and s.body["delay_s"] == 3.0
    assert list(s.body) == list(SCHEMAS["hil/feedback"].fields)
    f = _fields("arm/state")
    s = codec.decode("arm/state", _enc("arm/state", f))
    assert s.body["warnings"] == ["a", "b"]


def test_oversize_body_refused_before_an_unknown_topic():
    big = b"\x92" * (MAX_PAYLOAD_BYTES + 1)
    for fn in (codec.decode, codec.envelope):
        with pytest.raises(MessageError, match="no/such.*larger than"):
            fn("no/such", big)
        with pytest.raises(MessageError, match="no/such.*no schema"):
            fn("no/such", b"\x90")


def test_encode_from_several_threads_gives_the_same_bytes():
    """Each thread packs with its own msgpack Packer (a Packer is not thread-safe)."""
    import threading
    f = _fields("arm/state")
    want = [_enc("arm/state", f, seq=i) for i in range(300)]
    got: dict[int, list[bytes]] = {}

    def work(k: int) -> None:
        got[k] = [_enc("arm/state", f, seq=i) for i in range(300)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(got[k] == want for k in range(4))


# ---------------------------------------------------------------- envelopes (a batch of headers at once)
_INT_FORMS = {"u8": (0xCC, 1, False), "u16": (0xCD, 2, False), "u32": (0xCE, 4, False), "u64": (0xCF, 8, False),
              "i8": (0xD0, 1, True), "i16": (0xD1, 2, True), "i32": (0xD2, 4, True), "i64": (0xD3, 8, True)}


def _int(v, form):
    """``v`` as a msgpack int in ``form`` ("min": msgpack's own, the smallest), or None where it does not fit."""
    if form == "min":
        return msgpack.packb(v)
    marker, n, signed = _INT_FORMS[form]
    try:
        return bytes([marker]) + v.to_bytes(n, "big", signed=signed)
    except OverflowError:
        return None


def _header_case(topic, fields_bytes, r):
    """One body of ``topic``: a valid header in a random encoding, or one mutated to be refused."""
    version = SCHEMAS[topic].version if topic in SCHEMAS else 1
    sender = r.choice(["arm", "contact", "s" * 31, "s" * 32, "é"]).encode()
    vals = {"seq": int(r.choice([0, 1, 127, 128, 255, 65_536, 1 << 40, (1 << 63) - 1])),
            "t": int(r.choice([0, -5, -(1 << 63), (1 << 63) - 1, 1_000_000, -200, 1 << 31])),
            "h": int(r.choice([1, 1_000_000, (1 << 63) - 1])),
            "wall": int(r.choice([0, 123, -1, 1 << 62, -(1 << 63)]))}
    mutation = r.choice(["none"] * 8 + ["version", "version u8", "str8 sender", "bad utf-8 sender", "empty sender",
                                        "seq -1", "seq 2**63", "h 0", "h -1", "t 2**63", "wall 2**64-1", "float t",
                                        "nil h", "fields array", "truncated", "trailing", "flip", "garbage", "empty"])
    if mutation.startswith(("seq ", "h ", "t ", "wall ")):
        name, v = mutation.split()
        vals[name] = {"-1": -1, "0": 0, "2**63": 1 << 63, "2**64-1": (1 << 64) - 1}[v]
    ints = []
    for v in vals.values():
        enc = _int(v, r.choice(["min", "min", *_INT_FORMS]))
        ints.append(enc if enc is not None else msgpack.packb(v) if -(1 << 63) <= v < (1 << 64) else b"\xc0")
    ver = msgpack.packb(version + 1 if mutation == "version" else version)
    if mutation == "version u8":
        ver = bytes([0xCC, version])
    snd = msgpack.packb(sender.decode())
    if mutation == "str8 sender" and sender:
        snd = bytes([0xD9, len(sender)]) + sender
    if mutation == "bad utf-8 sender":
        snd = bytes([0xA2, 0xFF, 0xFE])
    if mutation == "empty sender":
        snd = b"\xa0"
    if mutation == "float t":
        ints[1] = msgpack.packb(1.0)
    if mutation == "nil h":
        ints[2] = b"\xc0"
    fields = msgpack.packb([1, 2]) if mutation == "fields array" else fields_bytes
    head = b"\x97" + ver + snd + b"".join(ints)
    body = head + fields
    if mutation == "truncated":
        body = body[:int(r.integers(0, len(body)))]
    elif mutation == "trailing":
        body = body + b"\x00"
    elif mutation == "flip":  # inside the header only: the fields' strings stay UTF-8 (see envelopes)
        k = int(r.integers(0, len(head)))
        body = body[:k] + bytes([int(r.integers(0, 256))]) + body[k + 1:]
    elif mutation == "garbage":
        body = bytes(r.integers(0, 256, int(r.integers(1, 80)), dtype=np.uint8))
    elif mutation == "empty":
        body = b""
    return body


def _fields_bytes(topic):
    return msgpack.packb(msgpack.unpackb(_enc(topic, _fields(topic)))[6], use_bin_type=True)


def _check_rows(topics, tids, bodies, env):
    for i, (tid, body) in enumerate(zip(tids, bodies, strict=True)):
        try:
            want = codec.envelope(topics[tid], body)
        except MessageError:
            assert not env.ok[i], (i, topics[tid], body[:40])
            assert env.sender[i] == -1 and env.seq[i] == env.t_ns[i] == env.h_ns[i] == env.wall_ns[i] == 0
            continue
        assert env.ok[i], (i, topics[tid], body[:40])
        got = (SCHEMAS[topics[tid]].version, env.senders[env.sender[i]], int(env.seq[i]), int(env.t_ns[i]),
               int(env.h_ns[i]), int(env.wall_ns[i]))
        assert got == want, (i, body[:40])


def test_envelopes_agree_with_envelope_body_by_body():
    """The independent reference is envelope() (msgpack's own unpackb) on each body: same verdict, same values,
    over every topic, every msgpack int encoding, long and bad senders, and bodies mutated to be refused."""
    r = np.random.default_rng(11)
    topics = sorted(SCHEMAS) + ["no/such/topic"]
    fields = {t: _fields_bytes(t) for t in SCHEMAS}
    fields["no/such/topic"] = fields["arm/wrench"]
    tids = [int(r.integers(0, len(topics))) for _ in range(3000)]
    bodies = [_header_case(topics[k], fields[topics[k]], r) for k in tids]
    env = codec.envelopes(topics, tids, bodies)
    assert 0.3 < env.ok.mean() < 0.9  # both verdicts are well exercised
    _check_rows(topics, tids, bodies, env)
    for lo, hi in ((0, 1), (0, 7), (100, 450), (2990, 3000)):  # and in pieces, each its own batch
        _check_rows(topics, tids[lo:hi], bodies[lo:hi], codec.envelopes(topics, tids[lo:hi], bodies[lo:hi]))


def test_envelopes_of_a_clean_batch_and_of_an_empty_one():
    topics = ["arm/wrench", "toy/state0"]  # the second has no body in the batch
    bodies = [_enc("arm/wrench", _fields("arm/wrench"), sender=f"s{i % 3}", seq=i, t_ns=i * 7 - 50, wall_ns=i)
              for i in range(500)]
    env = codec.envelopes(topics, [0] * 500, bodies)
    assert env.ok.all() and sorted(env.senders) == ["s0", "s1", "s2"]
    assert [env.senders[k] for k in env.sender] == [f"s{i % 3}" for i in range(500)]
    assert env.seq.tolist() == list(range(500)) and env.t_ns.tolist() == [i * 7 - 50 for i in range(500)]
    empty = codec.envelopes(topics, [], [])
    assert empty.ok.shape == (0,) and empty.senders == []


def test_envelopes_accepts_a_well_formed_fields_map_that_envelope_refuses():
    """The one documented difference: the fields map is skipped, not decoded."""
    body = msgpack.packb([SCHEMAS["arm/wrench"].version, "svc", 1, 0, 10, 0, {b"\xff\xfe": 1}], use_bin_type=False)
    with pytest.raises(MessageError):
        codec.envelope("arm/wrench", body)
    env = codec.envelopes(["arm/wrench"], [0], [body])
    assert env.ok[0] and env.senders[env.sender[0]] == "svc" and env.seq[0] == 1


def test_envelopes_many_malformed_bodies_in_one_batch():
    """More malformed bodies than the structure check re-synchronises on: the rest are still judged right."""
    good = [_enc("arm/wrench", _fields("arm/wrench"), seq=i) for i in range(60)]
    bodies = [b[:-3] if i % 3 == 0 else b for i, b in enumerate(good)]  # 20 truncated, spread out
    env = codec.envelopes(["arm/wrench"], [0] * 60, bodies)
    assert env.ok.tolist() == [i % 3 != 0 for i in range(60)]
    assert env.seq[env.ok].tolist() == [i for i in range(60) if i % 3]


def test_envelopes_bad_topic_index():
    with pytest.raises(IndexError, match="tids"):
        codec.envelopes(["arm/wrench"], [1], [_enc("arm/wrench", _fields("arm/wrench"))])
