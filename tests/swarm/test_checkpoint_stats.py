"""The run's checkpointer reports how long the database was really held."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from swarm.run import TimedSqliteSaver

pytestmark = pytest.mark.unit


class _S(TypedDict, total=False):
    n: int


def test_saver_counts_checkpoints_and_database_time() -> None:
    saver = TimedSqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    g = StateGraph(_S)
    g.add_node("a", lambda s: {"n": s.get("n", 0) + 1})
    g.add_node("b", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    out = g.compile(checkpointer=saver).invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
    assert out["n"] == 2
    assert saver.stats["checkpoints"] >= 3 and saver.stats["db_s"] > 0


def test_waiting_for_the_lock_is_not_counted_as_database_time() -> None:
    saver = TimedSqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))

    def hold() -> None:
        with saver.lock:
            time.sleep(0.05)

    threads = [threading.Thread(target=hold) for _ in range(4)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    # Four holders of 50 ms in a row: ~200 ms held, not the ~500 ms the waits add up to.
    assert 0.19 <= saver.stats["db_s"] <= wall + 0.01
