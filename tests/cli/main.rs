//! Integration tests: real temp repos, the real binary, real subprocesses.

mod common;

mod agents;
mod delivery;
mod demo;
mod generated;
mod log_show;
mod patch;
mod providers;
mod recovery;
mod restore;
mod run;
mod safety;
