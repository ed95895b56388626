//! PO: the verifier. Global verification, then the work order's acceptance commands; the
//! first nonzero exit stops it.

pub mod exec;
pub mod pycache;
pub mod verify;
