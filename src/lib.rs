//! skoop: a Kubernetes network-path diagnoser.
//!
//! The library is layered as described in `ARCHITECTURE.md`: [`net`] is the
//! network vocabulary every layer shares (one [`net::Protocol`]);
//! [`snapshot`] reads a snapshot directory (Kubernetes objects and per-namespace
//! dumps of the standard tools) into typed models, and [`collect`] writes such
//! dumps from a live network namespace. [`netstack`] is the kernel model of
//! one network namespace, [`packs`] the rule packs (CNI behaviour as data),
//! [`engine`] the walker that composes namespaces into a diagnosis, and
//! [`report`] what a diagnosis is shown as (the JSON contract, the pictures,
//! the text reports). [`pack_tests`] runs a pack's own tests, flows included,
//! above both packs and engine, and [`matrix`] many flows at once (and two
//! such answers compared). The command line in `src/cli/` is a thin shell
//! over these.

pub mod collect;
pub mod diagnostic;
pub mod engine;
pub mod matrix;
pub mod net;
pub mod netstack;
pub mod pack_tests;
pub mod packs;
pub mod report;
pub mod snapshot;

// The unit tests count allocations as the skoop binary does.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: packs::CountingAllocator = packs::CountingAllocator;
