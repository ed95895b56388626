//! What the commands do, as library functions over the store, git and the roles: each takes
//! plain values and returns a plain result, and the command line (`cli/*`) only parses its
//! arguments and prints what comes back.

pub mod apply;
pub mod checkout;
pub mod hook;
pub mod page;
pub mod reverify;
pub mod verify;
