//! skoop: a Kubernetes network-path diagnoser.
//!
//! The library is layered as described in `ARCHITECTURE.md`:
//! [`snapshot`] reads a snapshot directory (Kubernetes objects and per-namespace
//! dumps of the standard tools) into typed models, and [`collect`] writes such
//! dumps from a live network namespace. The command line in `src/cli/` is a
//! thin shell over these.

pub mod collect;
pub mod engine;
pub mod netstack;
pub mod packs;
pub mod snapshot;

// The unit tests count allocations as the skoop binary does.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: packs::CountingAllocator = packs::CountingAllocator;
