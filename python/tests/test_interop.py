"""Locks of clients no one on this project wrote, on the same servers and
names: redis-py's ``Lock`` and python-redis-lock on Redis, kazoo's
``Lock`` on ZooKeeper. Each excludes lockward, and lockward excludes each
(kazoo with ``extra_lock_patterns=["-lock-"]``, its option for Curator's
layout, which lockward shares)."""

from __future__ import annotations

import uuid

import pytest
import redis
import redis_lock
from kazoo.client import KazooClient

import lockward
from conftest import Servers, unique


def redis_address(url: str) -> tuple[str, int]:
    host_port = url.removeprefix("redis://").split("/")[0].split("?")[0]
    host, port = host_port.rsplit(":", 1)
    return host, int(port)


@pytest.fixture
def redis_url(servers: Servers) -> str:
    return servers.url("redis")


def test_redis_py_lock_and_lockward_exclude_each_other(redis_url: str) -> None:
    host, port = redis_address(redis_url)
    client = redis.Redis(host=host, port=port)
    # redis-py's Lock keeps the lock at the key of its name, as lockward does
    # with an empty prefix.
    store = lockward.Store(f"redis://{host}:{port}?prefix=")
    name = unique("redis-py")

    theirs = client.lock(name, timeout=10)
    assert theirs.acquire(blocking=False)
    with pytest.raises(lockward.Busy):
        store.try_lock(name)
    theirs.release()
    with store.lock(name, wait=2):
        assert not client.lock(name, timeout=10).acquire(blocking=False)
    assert client.lock(name, timeout=10).acquire(blocking=False)


def test_python_redis_lock_and_lockward_exclude_each_other(redis_url: str) -> None:
    host, port = redis_address(redis_url)
    client = redis.Redis(host=host, port=port)
    # python-redis-lock keeps the lock at "lock:NAME".
    store = lockward.Store(f"redis://{host}:{port}?prefix=lock:")
    name = unique("redis-lock")

    theirs = redis_lock.Lock(client, name, expire=10)
    assert theirs.acquire(blocking=False)
    with pytest.raises(lockward.Busy):
        store.try_lock(name)
    theirs.release()
    with store.lock(name, wait=2):
        assert not redis_lock.Lock(client, name, expire=10).acquire(blocking=False)
    after = redis_lock.Lock(client, name, expire=10)
    assert after.acquire(blocking=False)
    after.release()


def test_kazoo_lock_and_lockward_exclude_each_other(servers: Servers) -> None:
    url = servers.url("zookeeper")
    hosts = url.removeprefix("zk://").split("/")[0].split("?")[0]
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=10)
    try:
        store = lockward.Store(url)
        name = unique("kazoo").replace("/", "-")
        # lockward's lock NAME is the node /lockward/NAME, in Curator's
        # layout; kazoo counts Curator's contenders ("-lock-") as its own
        # with the option it has for that.
        path = f"/lockward/{name}"
        curator = ["-lock-"]

        theirs = zk.Lock(path, identifier=str(uuid.uuid4()), extra_lock_patterns=curator)
        assert theirs.acquire(blocking=False)
        with pytest.raises(lockward.Busy):
            store.try_lock(name)
        theirs.release()
        with store.lock(name, wait=5):
            blocked = zk.Lock(path, identifier="kazoo", extra_lock_patterns=curator)
            assert not blocked.acquire(blocking=False)
        after = zk.Lock(path, identifier="kazoo", extra_lock_patterns=curator)
        assert after.acquire(timeout=5)
        after.release()
    finally:
        zk.stop()
        zk.close()
