//! The Linux kernel model of one network namespace: given a packet, what the
//! kernel does with it, and why.
//!
//! **Architecture Invariant:** `netstack` knows nothing of Kubernetes or CNIs.
//! It reads only the namespace dump types of `snapshot::netns`.
//!
//! **Architecture Invariant:** what the dump cannot tell is [`Tri::Unknown`],
//! never a guess.

pub mod ipvs;
pub mod namespace;
pub mod netfilter;
pub mod routing;
pub mod source6;

use std::ops::Not;

/// Three-valued truth: a match the model cannot evaluate is `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tri {
    True,
    False,
    Unknown,
}

impl From<bool> for Tri {
    fn from(value: bool) -> Tri {
        if value { Tri::True } else { Tri::False }
    }
}

impl Not for Tri {
    type Output = Tri;

    fn not(self) -> Tri {
        match self {
            Tri::True => Tri::False,
            Tri::False => Tri::True,
            Tri::Unknown => Tri::Unknown,
        }
    }
}

impl Tri {
    /// Kleene conjunction: false wins over unknown, unknown over true.
    pub fn and(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::False, _) | (_, Tri::False) => Tri::False,
            (Tri::Unknown, _) | (_, Tri::Unknown) => Tri::Unknown,
            (Tri::True, Tri::True) => Tri::True,
        }
    }
}
