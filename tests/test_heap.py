"""pycanal.heap: a settled process's collections skip its set-up heap, once per process."""

import gc
import os
import weakref

import pytest

from pycanal import heap


@pytest.fixture
def restore_gc():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    heap._settled_in = None


def test_settle_freezes_what_is_alive_once_per_process(restore_gc):
    class Held:
        pass

    held = Held()
    alive = weakref.ref(held)
    gc.unfreeze()
    heap._settled_in = None
    heap.settle()
    del held
    assert alive() is None  # frozen objects are still freed by refcounting
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the import heap: modules, classes, functions
    assert len(gc.get_objects(generation=2)) < frozen / 10
    kept = [[i] for i in range(1000)]  # made after: still seen by the collector
    heap.settle()  # a no-op in the same process
    # Not equal: a frozen object another thread frees meanwhile leaves the count lower (CI saw -7).
    assert gc.get_freeze_count() <= frozen
    assert sum(1 for o in gc.get_objects() if type(o) is list and len(o) == 1) >= len(kept)


def test_a_forked_child_settles_its_own_heap(restore_gc):
    heap.settle()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            extra = [[i] for i in range(5000)]  # made after the fork: the child's own
            heap.settle()  # the parent's flag came along, but this is another process
            left = len(gc.get_objects())
            os.write(w, f"{left} {int(heap._settled_in == os.getpid())} {len(extra)}".encode())
        finally:
            os._exit(0)
    os.close(w)
    left, settled, _ = map(int, os.read(r, 64).split())
    os.close(r)
    os.waitpid(pid, 0)
    assert settled == 1 and left < 1000  # the 5,000 lists frozen with the rest


def test_hold_long_lived_makes_full_collections_rarer(restore_gc):
    young, middle, _ = gc.get_threshold()
    heap.hold_long_lived(full_every=77)
    assert gc.get_threshold() == (young, middle, 77)
