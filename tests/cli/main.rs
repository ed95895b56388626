//! Integration tests: real temp repos, the real binary, real subprocesses.

mod common;

mod agents;
mod architecture;
mod attest;
mod audit_concurrent;
mod batch;
mod candidates;
mod confine_a;
mod contracts;
mod delivery;
mod demo;
mod escapes;
mod fleet;
mod generated;
mod history;
mod ignored_kept;
mod isolation;
mod log_show;
mod newcomer;
mod patch;
mod per_test;
mod pool;
mod providers;
mod pycache;
mod recovery;
mod restore;
mod run;
mod safety;
mod sandbox;
#[cfg(feature = "test-hooks")]
mod saved_state;
mod shallow;
mod sharing;
mod status;
mod terminal;
mod trust;
