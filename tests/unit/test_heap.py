"""heap.frozen: the window's garbage is held off during the diagnosis, and after it in the child."""

from __future__ import annotations

import gc
import weakref

import pytest

from rnndoctor.capture import heap


class _Node:
    """A cycle's member: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def _cycle() -> weakref.ref:
    """A cyclic garbage object, as a weak reference (dead once collected). A collection first
    sets the youngest generation's count to 0, so that no automatic one frees the object
    between here and the ``gc.freeze`` that follows."""
    gc.collect()
    return weakref.ref(_Node())


@pytest.fixture(autouse=True)
def _gc_state():
    """Each test starts unfrozen with automatic collection on, and leaves it so."""
    was = gc.isenabled()
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    gc.enable() if was else gc.disable()


def test_garbage_from_before_the_block_survives_its_collections_and_the_block_thaws():
    before = _cycle()
    with heap.frozen():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0
        inside = _cycle()
        gc.collect()
        assert inside() is None  # what the block allocated is collected
        assert before() is not None  # the garbage alive at its start is frozen
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert before() is None


def test_without_thaw_the_objects_stay_frozen_and_automatic_collection_comes_back():
    before = _cycle()
    with heap.frozen(thaw=False):
        pass
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    after = _cycle()
    gc.collect()
    assert after() is None  # what runs after the block is collected as usual
    assert before() is not None  # the window's garbage is never finalised in the child


def test_automatic_collection_stays_off_when_it_was_off():
    gc.disable()
    with heap.frozen():
        pass
    assert not gc.isenabled()


def test_the_state_comes_back_when_the_block_raises():
    with pytest.raises(RuntimeError), heap.frozen():
        raise RuntimeError("a phase failed")
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
