"""protocol.scheduler's start / advance / snapshot / restore: a run saved at an instant and restored in
another process goes on bit-identically to the uninterrupted run.

Reference: the uninterrupted run itself (``simulate`` in one call), topic by topic and byte by byte.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from errors import LifecycleError
from protocol.scheduler import advance, restore, simulate, snapshot, start
from testkit.toys import ChainMass
from tests.compare_logs import by_topic

MS = 1_000_000
CHAIN = {"toy": {"mass": [1.0, 4.0, 2.0], "k": [40.0, 25.0], "rest": [1.0, 1.0], "x0": [0.0, 1.1, 2.3],
                 "v0": [0.3, -0.2, 0.1], "events": True},
         "services": {"a": {"index": 0}, "b": {"index": 1}, "c": {"index": 2}}}
PERIODS = {"a": MS, "b": 2 * MS, "c": 10 * MS}
COUPLING = {"a": {"*": 10 * MS}, "b": {"*": 10 * MS}}


def _models() -> list[ChainMass]:
    return [ChainMass(CHAIN, n, PERIODS[n]) for n in ("a", "b", "c")]


_CONTINUE = """
import pickle, sys
from protocol.scheduler import advance, restore
blob = open(sys.argv[1], "rb").read()
frames = []
sched = restore(blob)
advance(sched, int(sys.argv[2]), frames.append)
rows = {m.name: m.obj.rows for m in sched.models}
open(sys.argv[3], "wb").write(pickle.dumps((frames, rows)))
"""


def test_a_run_restored_in_another_process_goes_on_bit_identically(tmp_path: Path) -> None:
    whole: list[bytes] = []
    ref = simulate(_models(), 1500 * MS, coupling=COUPLING, on_frame=whole.append)
    first: list[bytes] = []
    sched = advance(start(_models(), coupling=COUPLING), 730 * MS, first.append)
    (tmp_path / "snap").write_bytes(snapshot(sched))
    out = tmp_path / "rest"
    subprocess.run([sys.executable, "-c", _CONTINUE, str(tmp_path / "snap"), str(1500 * MS), str(out)], check=True,
                   cwd=Path(__file__).resolve().parents[2])
    rest, rows = pickle.loads(out.read_bytes())
    a, b = by_topic(whole), by_topic(first + rest)
    assert sorted(a) == sorted(b) and len(a) >= 5  # states, springs, events
    for topic in a:
        assert a[topic] == b[topic], topic
    assert any(len(v) > 1 for k, v in a.items() if k.startswith(b"toy/event"))  # events cross the snapshot
    for m in ref.models:  # the trajectories, float for float
        assert rows[m.name] == m.obj.rows


def test_a_restored_run_hands_its_frames_to_sinks_added_then() -> None:
    class Sink:
        name, topics = "rec", ()

        def __init__(self) -> None:
            self.seen: list[str] = []

        def on_message(self, topic: str, payload: bytes) -> None:
            self.seen.append(topic)

    sched = advance(start(_models(), coupling=COUPLING), 100 * MS)
    sink = Sink()
    got: list[bytes] = []
    advance(restore(snapshot(sched), [sink]), 200 * MS, got.append)
    assert sink.seen == [f[:f.index(b"\0")].decode() for f in got] and len(got) > 20


def test_a_snapshot_is_refused_between_coupling_instants_and_with_frames_pending() -> None:
    models = [ChainMass(CHAIN, n, MS) for n in ("a", "b", "c")]
    sched = advance(start(models, coupling={"c": {"*": 10 * MS}}), 105 * MS)  # c's state every 10 ms
    with pytest.raises(LifecycleError, match="not a coupling instant of c's toy/state2"):
        snapshot(sched)
    snapshot(advance(sched, 110 * MS))
    sched = start(_models(), coupling=COUPLING)  # initial outputs not handed over yet
    with pytest.raises(LifecycleError, match="not yet handed over"):
        snapshot(sched)
    with pytest.raises(LifecycleError, match="not a snapshot"):
        restore(pickle.dumps({"a": 1}))


class _Told(ChainMass):
    """A chain mass that keeps the coupling periods it is told."""

    def set_coupling(self, periods: dict[str, int]) -> None:
        self.told = dict(periods)


def test_a_model_replaced_by_one_given_its_state_goes_on_bit_identically_and_a_mismatch_is_refused() -> None:
    """Scheduler.replace_model: a chain mass built afresh, given the running one's state, is told the coupling
    the running one was told and continues the uninterrupted run byte for byte; another service's model, or an
    unknown name, is refused."""
    def models() -> list[ChainMass]:
        return [_Told(CHAIN, "a", PERIODS["a"]), *_models()[1:]]

    whole: list[bytes] = []
    simulate(models(), 200 * MS, coupling=COUPLING, on_frame=whole.append)
    got: list[bytes] = []
    sched = advance(start(models(), coupling=COUPLING), 100 * MS, got.append)
    old = next(m.obj for m in sched.models if m.name == "a")
    fresh = _Told(CHAIN, "a", PERIODS["a"])
    assert sched.replace_model("a", fresh) is old
    assert fresh.told == old.told == {"toy/state0": 10 * MS, "toy/spring0": 10 * MS, "toy/event0": 10 * MS}
    fresh.__dict__.update(old.__dict__)  # its state
    advance(sched, 200 * MS, got.append)
    assert by_topic(got) == by_topic(whole)
    with pytest.raises(LifecycleError, match=r"replace_model: 'a': the new model's ports or period differ"):
        sched.replace_model("a", ChainMass(CHAIN, "b", PERIODS["b"]))
    with pytest.raises(LifecycleError, match=r"replace_model: no model 'zz' in this process"):
        sched.replace_model("zz", fresh)

    class WithContext(_Told):  # the same ports and period, but its state in a context: the run holds none for it
        def new_context(self) -> dict:
            return {}

    with pytest.raises(LifecycleError, match=r"replace_model: 'a': one of the two models has a context"):
        sched.replace_model("a", WithContext(CHAIN, "a", PERIODS["a"]))
