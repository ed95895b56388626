//! PO: the verifier. Global verification, then the work order's contract (`pass_to_pass`,
//! `fail_to_pass`) and acceptance commands; the first nonzero exit stops it. Before a run, the
//! baseline check proves the contract's red on the unchanged tree.

pub mod baseline;
pub mod cache;
pub mod exec;
mod fill;
pub mod grade;
mod pyc_paths;
pub mod pycache;
pub mod report;
pub mod verify;
