//! `-m set`: membership of the packet's fields in an ipset.

use super::Packet;
use super::matching::Test;
use crate::snapshot::netns::ipset::IpSets;
use crate::snapshot::netns::iptables::SetMatch;

pub(super) fn test(sets: Option<&IpSets>, set: &SetMatch, _packet: &Packet) -> Test {
    match sets {
        None => Test::unknown(format!(
            "ipset `{}`: ipset-save.txt was not collected",
            set.name
        )),
        Some(_) => Test::unknown(format!("ipset `{}`: PENDING ipset model", set.name)),
    }
}
