//! git-factory: a strict, deterministic SE → TR → PO loop for LLM-proposed changes.
//!
//! ```text
//!   work order ──► SE (provider proposes a diff / writes)
//!                   │
//!                   ▼
//!                  TR (parse, scope, compute in memory, write all or nothing)
//!                   │
//!                   ▼
//!                  PO (global verification, then acceptance commands)
//!                   │
//!        route ◄────┘   PASS → keep the change
//!                       FAIL → roll back, brief the next attempt, or stop
//! ```
//!
//! The harness — never the model — decides retries, rollback and termination, and records
//! every run in git (`refs/factory/<run_id>`, `refs/notes/factory`). A run is a pipeline of
//! stages in [`run`]: plan, place, the attempt loop (or a race of them), deliver, record.

pub mod budget;
pub mod cli;
pub mod clock;
pub mod config;
pub mod cost;
pub mod crash;
pub mod delivery;
pub mod env;
pub mod error;
pub mod evidence;
pub mod git;
pub mod graph;
pub mod harness;
pub mod identity;
pub mod interrupt;
pub mod journal;
pub mod ops;
pub mod roles;
pub mod run;
pub mod sandbox;
pub mod secrets;
pub mod store;
pub mod trace;
pub mod ui;
pub mod workorder;
