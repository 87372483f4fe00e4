"""The local-model pool (models/local_pool.py): off by default, sized to the cores and the free
memory, instances loaded on first need and lent to one caller at a time; generate borrows one."""

from __future__ import annotations

import contextlib
import sys
import threading
import types
from pathlib import Path

import pytest

from harnessevolve.models import local, local_pool
from harnessevolve.models.local_pool import LocalPoolError, ModelPool, pool_size, requested_size


def test_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(local_pool.POOL_ENV, raising=False)
    assert requested_size() == 1
    monkeypatch.setenv(local_pool.POOL_ENV, "auto")
    assert requested_size() is None
    monkeypatch.setenv(local_pool.POOL_ENV, "3")
    assert requested_size() == 3
    for bad in ("0", "-1", "two"):
        monkeypatch.setenv(local_pool.POOL_ENV, bad)
        with pytest.raises(LocalPoolError):
            requested_size()


def test_size_is_capped_by_cores_and_free_memory(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x" * 1000)  # an instance needs 1500 bytes at MEMORY_FACTOR 1.5
    assert pool_size(model, 1, cores=8, available_bytes=10**9) == 1
    assert pool_size(model, None, cores=2, available_bytes=10**9) == 2  # auto: one per core
    assert pool_size(model, 4, cores=2, available_bytes=10**9) == 2
    assert pool_size(model, 4, cores=8, available_bytes=4000) == 2  # 4000 // 1500
    assert pool_size(model, 4, cores=8, available_bytes=100) == 1  # never below one
    assert pool_size(model, 4, cores=8, available_bytes=None) == 4  # memory unknown: cores only


def test_a_second_instance_is_loaded_only_while_the_first_is_busy() -> None:
    loads: list[int] = []
    pool = ModelPool(lambda: loads.append(len(loads)) or f"instance-{len(loads)}", 2)
    with pool.borrow() as a:
        pass
    with pool.borrow() as b:
        assert b == a and loads == [0]  # the free one is reused
        with pool.borrow() as c:
            assert c != a and loads == [0, 1]


def test_two_callers_run_at_once_with_two_instances() -> None:
    """Both callers must be inside a borrowed instance at the same time to pass the barrier: with
    one instance the second would wait for the first, and the barrier would break."""
    pool = ModelPool(object, 2)
    both = threading.Barrier(2, timeout=30)
    failures: list[BaseException] = []

    def call() -> None:
        try:
            with pool.borrow():
                both.wait()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures and len(pool.instances) == 2


def test_a_full_pool_makes_callers_wait_for_a_free_instance() -> None:
    pool = ModelPool(object, 1)
    taken = threading.Event()
    order: list[str] = []

    def second() -> None:
        taken.wait(30)
        with pool.borrow():
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with pool.borrow():
        taken.set()
        order.append("first done")
    thread.join(30)
    assert order == ["first done", "second"] and len(pool.instances) == 1


def test_a_failed_load_frees_its_place() -> None:
    attempts: list[int] = []

    def load() -> object:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("out of memory")
        return object()

    pool = ModelPool(load, 1)
    with pytest.raises(RuntimeError), pool.borrow():
        pass
    with pool.borrow():
        pass
    assert len(attempts) == 2 and len(pool.instances) == 1


class FakeLlama:
    made: list[FakeLlama] = []

    def __init__(self, **kwargs: object) -> None:
        self.threads = kwargs["n_threads"]
        FakeLlama.made.append(self)

    def tokenize(self, data: bytes, **_: object) -> list[int]:
        return list(range(len(data.split())))

    def create_completion(self, **_: object) -> dict[str, object]:
        return {
            "choices": [{"text": "hello", "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }


@pytest.fixture
def fake_pool_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GGUF path served by ``FakeLlama`` with a pool of 2 on 2 cores."""
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(
        sys.modules, "llama_cpp", types.SimpleNamespace(Llama=FakeLlama, StoppingCriteriaList=list)
    )
    monkeypatch.setattr(local, "_POOLS", {})
    # the stand-in has no CPU backend to choose; the real one is chosen once per process, so a
    # worker that met no real model before must not try it on the stand-in (or cache its absence)
    monkeypatch.setattr(local, "ensure_cpu_backend", lambda: None)
    monkeypatch.setattr(local_pool.os, "cpu_count", lambda: 2)
    monkeypatch.setenv(local_pool.POOL_ENV, "2")
    return model


def test_generate_borrows_from_a_pool_of_one_thread_instances(fake_pool_model: Path) -> None:
    model = fake_pool_model
    FakeLlama.made.clear()
    reply = local.generate(str(model), [{"role": "user", "content": "hi"}], max_tokens=4)
    pool = local.model_pool(str(model))
    assert reply.text == "hello" and pool.size == 2
    assert [m.threads for m in FakeLlama.made] == [1]  # one loaded so far, one thread each


class OverlapLlama:
    """Records how many are being made at once: each waits (up to 0.5 s) for a second to start."""

    making = 0
    most = 0
    meet = threading.Barrier(2, timeout=0.5)
    guard = threading.Lock()

    def __init__(self, **_: object) -> None:
        with OverlapLlama.guard:
            OverlapLlama.making += 1
            OverlapLlama.most = max(OverlapLlama.most, OverlapLlama.making)
        with contextlib.suppress(threading.BrokenBarrierError):  # nobody else was being made meanwhile
            OverlapLlama.meet.wait()
        with OverlapLlama.guard:
            OverlapLlama.making -= 1


def test_two_instances_are_never_loaded_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # two Llama(...) made at once in one process end it silently with exit status 0 (local._LOAD_LOCK)
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=OverlapLlama))
    monkeypatch.setattr(local, "ensure_cpu_backend", lambda: None)  # as in fake_pool_model
    config = local.LocalModelConfig()
    loads = [threading.Thread(target=local._load_llama, args=(model, config, 1)) for _ in range(2)]
    for thread in loads:
        thread.start()
    for thread in loads:
        thread.join()
    assert OverlapLlama.most == 1


def test_a_free_instance_is_chosen_by_preference_then_last_given_back() -> None:
    free = ["a", "b", "c"]
    assert local_pool.best_index(free, None) == 2  # no preference: the last given back
    assert local_pool.best_index(free, {"a": 5, "b": 1, "c": 1}.__getitem__) == 0
    assert local_pool.best_index(free, {"a": 1, "b": 3, "c": 3}.__getitem__) == 2  # ties: the last


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("", ""),
        ("abc", ""),
        ("abc", "abd"),
        ("abc", "abcdef"),
        ("same", "same"),
        ("x" * 999 + "y", "x" * 999),
    ],
)
def test_common_prefix_length(a: str, b: str) -> None:
    import os.path

    assert local_pool.common_prefix_length(a, b) == len(os.path.commonprefix([a, b]))


def test_each_conversation_keeps_to_the_instance_that_holds_its_prefix(fake_pool_model: Path) -> None:
    """Two rollouts take turns on a pool of two: each call goes back to the instance whose cache
    holds its conversation so far; a new conversation that shares only the system prompt goes to
    the instance nobody is continuing rather than evict the other's history."""
    model = fake_pool_model
    pool = local.model_pool(str(model))
    with pool.borrow(), pool.borrow():  # both instances loaded, both free again
        pass
    system = {"role": "system", "content": "You run shell commands."}

    def turns(task: str, steps: int) -> list[dict[str, str]]:
        history = [system, {"role": "user", "content": f"Task: {task}. " * 20}]
        for step in range(steps):
            history += [{"role": "assistant", "content": f"call {step}"}, {"role": "user", "content": "ok"}]
        return history

    served: dict[str, set[int]] = {"one": set(), "two": set()}
    for step in range(3):
        for task in ("one", "two"):
            local.generate(str(model), turns(task, step), max_tokens=4)
            holder = next(i for i, m in enumerate(pool.instances) if f"Task: {task}" in m.conversation)
            served[task].add(holder)
    assert len(served["one"]) == len(served["two"]) == 1 and served["one"] != served["two"]
