//! SE: the proposer. Builds the prompt, asks a provider, parses the answer strictly. It never
//! runs anything and never decides anything.

pub mod audit;
pub mod prompt;
pub mod proposal;
pub mod provider;
pub mod sealed;
pub mod watched;
