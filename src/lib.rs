//! skoop: a Kubernetes network-path diagnoser.
//!
//! The library is layered as described in `ARCHITECTURE.md` ("Layers"; each
//! imports only those below it, as `tests/layering.rs` holds): [`net`] is the
//! network vocabulary every layer shares (one [`net::Protocol`]), and
//! [`diagnostic`] is what every layer reports in; [`snapshot`] reads a snapshot directory
//! (Kubernetes objects and per-namespace dumps of the standard tools) into
//! typed models; [`netstack`] is the kernel model of one network namespace
//! (built once per snapshot), [`packs`] the rule packs (CNI behaviour as
//! data); [`collect`] writes snapshots from live systems, and [`engine`] is
//! the walker that composes a snapshot's namespaces into a diagnosis;
//! [`confirm`] sends a diagnosis's flow through collection's shells and
//! reads the kernel's counters beside it; [`report`] is what a diagnosis is shown as (the JSON contract, the
//! pictures, the text reports). Above
//! them, [`pack_tests`] runs a pack's own tests, flows included,
//! [`matrix`] many flows at once (and two such answers compared), and
//! [`live_flow`] collects what one flow needs from a live cluster by
//! walking it. The command line in `src/cli/` is a thin shell over these.

pub mod collect;
pub mod confirm;
pub mod diagnostic;
pub mod engine;
pub mod live_flow;
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
