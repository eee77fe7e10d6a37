//! The conformance suite: one set of checks, instantiated for every backend.
//! Each backend module provides a fixture (how to open a store on it) and
//! invokes `conformance!`.

mod resources;
mod suite;

#[cfg(feature = "etcd")]
mod etcd;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod redis_cluster;
#[cfg(feature = "redis")]
mod redlock;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "zookeeper")]
mod zookeeper;
