//! The three roles of the loop: SE proposes, TR scopes and applies, PO verifies.

pub mod change;
pub mod po;
pub mod se;
pub mod tr;
