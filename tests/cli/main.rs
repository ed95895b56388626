//! Integration tests: real temp repos, the real binary, real subprocesses.

mod common;

mod agents;
mod architecture;
mod attack;
mod attest;
mod audit_concurrent;
mod batch;
mod candidates;
mod confine_a;
mod confine_reach;
mod contracts;
mod delivery;
mod demo;
mod escapes;
mod fleet;
mod generated;
mod history;
mod ignored_kept;
mod isolation;
mod judges;
mod log_show;
mod newcomer;
mod package;
mod page;
mod patch;
mod per_test;
mod platform;
mod pool;
mod providers;
mod pycache;
mod real_suite;
mod recovery;
mod release;
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
mod weakened;
