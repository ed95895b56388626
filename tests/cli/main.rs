//! Integration tests: real temp repos, the real binary, real subprocesses.

mod common;

mod agents;
mod candidates;
mod contracts;
mod delivery;
mod demo;
mod generated;
mod log_show;
mod patch;
mod providers;
mod recovery;
mod run;
mod safety;
mod trust;
