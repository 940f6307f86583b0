//! Live collection: the data a snapshot holds, taken from a running system.
//!
//! - [`local`]: one network namespace of this machine (`skoop collect local`).
//! - [`api`], [`objects`], [`live`]: a cluster through the Kubernetes API —
//!   its objects, and the network namespaces of its nodes and pods, reached
//!   through a collector pod per node or a `--node-exec` command
//!   ([`collector`], [`shell`], [`node`]), each command's outcome told in
//!   [`command`]'s terms.
//! - [`dump`]: what every way of collecting shares: one namespace's dump
//!   files, written by running [`DUMP_FILES`](crate::snapshot::netns::DUMP_FILES).
//! - [`credential`]: a kubeconfig's exec credential plugin, run within a
//!   time limit before kube sees the kubeconfig.
//! - [`rbac`]: the least privilege all of it needs (`deploy/rbac.yaml`).
//!
//! Its files import downwards only, in this order (`tests/layering.rs`):
//! `command`, `rbac` < `credential` < `api` < `collector` < `shell` < `dump` < `local`,
//! `node`, `objects` < `live`. Which namespaces one flow needs is found by
//! walking it, above this module and the engine (`crate::live_flow`).
//!
//! **Invariant:** `kube`, `k8s-openapi` and `tokio` are used here (and in
//! `snapshot::cluster::convert` for the API types); the engine stays
//! synchronous and reads only what collection wrote into a snapshot
//! directory, so every live answer can be replayed offline.

pub mod api;
pub mod collector;
pub mod command;
pub mod credential;
pub mod dump;
pub mod live;
pub mod local;
pub mod node;
pub mod objects;
pub mod rbac;
pub mod shell;

pub use dump::{CollectError, CollectReport, SkipReason, Skipped, Written};
pub use local::collect_local;
