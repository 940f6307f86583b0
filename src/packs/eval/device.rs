//! The device kind: a device, or every device a `*` pattern names, with the
//! kind, MTU, state, master, VXLAN settings, MAC and address a check wants.

use super::kinds::{NamespaceDump, fail};
use super::{Evaluator, Failure, Outcome};
use crate::diagnostic::Evidence;
use crate::packs::host::{link_is_up, link_kind, lladdr_text};
use crate::packs::model::{DeviceCheck, DeviceState};
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::addr::InterfaceAddrs;
use crate::snapshot::netns::link::{Link, LinkKind};

impl Evaluator<'_> {
    pub(super) fn device(&self, device: &DeviceCheck, at: &NamespaceDump<'_>) -> Outcome {
        let &NamespaceDump { ctx, dir, dump } = at;
        let DeviceCheck {
            name,
            kind,
            mtu,
            state,
            master,
            address,
            mac,
            vni,
            port,
            local,
        } = device;
        let name = self.required_text(name, ctx)?;
        let wanted = DeviceWanted {
            kind: self.optional_text(kind.as_ref(), ctx)?,
            mtu: self.optional_text(mtu.as_ref(), ctx)?,
            state: *state,
            master: self.optional_text(master.as_ref(), ctx)?,
            address: self.optional_text(address.as_ref(), ctx)?,
            mac: self.optional_text(mac.as_ref(), ctx)?,
            vxlan: VxlanWanted {
                vni: self.optional_text(vni.as_ref(), ctx)?,
                port: self.optional_text(port.as_ref(), ctx)?,
                local: self.optional_text(local.as_ref(), ctx)?,
            },
        };
        let links = dump
            .links
            .as_ref()
            .ok_or_else(|| at.not_collected(DumpFile::IpLink))?;
        let addrs = match wanted.address {
            Some(_) => Some(
                dump.addrs
                    .as_ref()
                    .ok_or_else(|| at.not_collected(DumpFile::IpAddr))?,
            ),
            None => None,
        };
        let pattern = name.contains('*');
        let matching: Vec<_> = links.iter().filter(|l| glob(&name, &l.ifname)).collect();
        let expected = wanted.describe();
        let described = |ifname: &str| {
            if expected.is_empty() {
                format!("device {ifname}")
            } else {
                format!("{ifname}: {}", expected.join(", "))
            }
        };
        if matching.is_empty() && !pattern {
            return fail(
                format!("no device {name}"),
                described(&name),
                Evidence::file(dir.join(DumpFile::IpLink.name())),
            );
        }
        let mut failures = Vec::new();
        for link in matching {
            let wrong = wanted.compare(link, addrs.map(Vec::as_slice));
            if !wrong.is_empty() {
                failures.push(Failure {
                    actual: format!("{}: {}", link.ifname, wrong.join(", ")),
                    expected: described(&link.ifname),
                    evidence: vec![at.element(DumpFile::IpLink, links, Some(link))],
                });
            }
        }
        Ok(failures)
    }
}

/// What a device check wants of every device it names; `None` is not checked.
struct DeviceWanted {
    kind: Option<String>,
    mtu: Option<String>,
    state: Option<DeviceState>,
    master: Option<String>,
    address: Option<String>,
    mac: Option<String>,
    vxlan: VxlanWanted,
}

impl DeviceWanted {
    /// What every matching device must be, whichever it is.
    fn describe(&self) -> Vec<String> {
        let mut expected = Vec::new();
        if let Some(kind) = &self.kind {
            expected.push(format!("kind {kind}"));
        }
        if let Some(mtu) = &self.mtu {
            expected.push(format!("mtu {mtu}"));
        }
        if let Some(state) = self.state {
            expected.push(
                if state == DeviceState::Up {
                    "up"
                } else {
                    "down"
                }
                .to_owned(),
            );
        }
        if let Some(master) = &self.master {
            expected.push(format!("master {master}"));
        }
        self.vxlan.describe(&mut expected);
        if let Some(mac) = &self.mac {
            expected.push(format!("MAC {mac}"));
        }
        if let Some(address) = &self.address {
            expected.push(format!("address {address}"));
        }
        expected
    }

    /// What `link` has wrong; `addrs`, the namespace's addresses, are read
    /// when an address is wanted.
    fn compare(&self, link: &Link, addrs: Option<&[InterfaceAddrs]>) -> Vec<String> {
        let mut wrong = Vec::new();
        if let Some(kind) = &self.kind
            && link_kind(link) != kind
        {
            wrong.push(format!("kind {}", or_none(link_kind(link))));
        }
        if let Some(mtu) = &self.mtu
            && link.mtu.to_string() != *mtu
        {
            wrong.push(format!("mtu {}", link.mtu));
        }
        if let Some(state) = self.state {
            let want_up = state == DeviceState::Up;
            if link_is_up(link) != want_up {
                wrong.push(format!("state {}", link.operstate));
            }
        }
        if let Some(master) = &self.master
            && link.master.as_deref() != Some(master.as_str())
        {
            wrong.push(format!(
                "master {}",
                link.master.as_deref().unwrap_or("none")
            ));
        }
        self.vxlan.compare(link, &mut wrong);
        if let Some(mac) = &self.mac {
            let own = link.address.as_ref().map(lladdr_text);
            if !own
                .as_deref()
                .is_some_and(|own| own.eq_ignore_ascii_case(mac))
            {
                wrong.push(format!("MAC {}", own.as_deref().unwrap_or("none")));
            }
        }
        if let (Some(address), Some(addrs)) = (&self.address, addrs) {
            let held: Vec<String> = addrs
                .iter()
                .filter(|a| a.ifname == link.ifname)
                .flat_map(|a| &a.addresses)
                .map(|a| format!("{}/{}", a.local, a.network.prefix_len()))
                .collect();
            // `IP/LEN` wants that prefix length too, `IP` any.
            let holds = held.iter().any(|h| {
                h == address || (!address.contains('/') && h.split('/').next() == Some(address))
            });
            if !holds {
                wrong.push(if held.is_empty() {
                    "no address".to_owned()
                } else {
                    format!("address {}", held.join(", "))
                });
            }
        }
        wrong
    }
}

/// What a device check wants of a VXLAN device; `None` is not checked.
struct VxlanWanted {
    vni: Option<String>,
    port: Option<String>,
    local: Option<String>,
}

impl VxlanWanted {
    /// What is wanted, for the finding's `expected`.
    fn describe(&self, expected: &mut Vec<String>) {
        if let Some(vni) = &self.vni {
            expected.push(format!("VNI {vni}"));
        }
        if let Some(port) = &self.port {
            expected.push(format!("UDP port {port}"));
        }
        if let Some(local) = &self.local {
            expected.push(format!("local {local}"));
        }
    }

    /// Adds what `link` has wrong to `wrong`. A port the dump does not show
    /// (older iproute2) is not held against it.
    fn compare(&self, link: &Link, wrong: &mut Vec<String>) {
        if self.vni.is_none() && self.port.is_none() && self.local.is_none() {
            return;
        }
        let Some(LinkKind::Vxlan(vxlan)) = link.kind() else {
            wrong.push("no VXLAN settings (not a vxlan device)".to_owned());
            return;
        };
        if let Some(vni) = &self.vni
            && vxlan.id.to_string() != *vni
        {
            wrong.push(format!("VNI {}", vxlan.id));
        }
        if let (Some(port), Some(found)) = (&self.port, vxlan.port)
            && found.to_string() != *port
        {
            wrong.push(format!("UDP port {found}"));
        }
        if let Some(local) = &self.local {
            let found = vxlan.local.map(|l| l.to_string());
            if found.as_deref() != Some(local.as_str()) {
                wrong.push(format!("local {}", found.as_deref().unwrap_or("unset")));
            }
        }
    }
}

fn or_none(text: &str) -> &str {
    if text.is_empty() { "none" } else { text }
}

/// `*` matches any run of characters; everything else itself.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, rest)) => {
            let Some(tail) = name.strip_prefix(prefix) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| glob(rest, &tail[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_star_matches_any_run() {
        assert!(glob("*", "eth0"));
        assert!(glob("veth*", "veth53842afe"));
        assert!(glob("cali*x", "cali1234x"));
        assert!(!glob("veth*", "eth0"));
        assert!(glob("eth0", "eth0"));
    }
}
