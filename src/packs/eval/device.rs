//! The device kind: a device, or every device a `*` pattern names, with the
//! kind, MTU, state, master, VXLAN settings, MAC and address a check wants.

use std::net::IpAddr;

use super::kinds::{NamespaceDump, fail};
use super::{Evaluator, Failure, Outcome};
use crate::diagnostic::Evidence;
use crate::packs::host::{link_is_up, link_kind, lladdr_text};
use crate::packs::model::{DeviceCheck, DeviceState};
use crate::snapshot::netns::DumpFile;
use crate::snapshot::netns::addr::InterfaceAddrs;
use crate::snapshot::netns::link::{Link, LinkKind, LinkPort};

impl Evaluator<'_> {
    pub(super) fn device(&self, device: &DeviceCheck, at: &NamespaceDump<'_>) -> Outcome {
        let &NamespaceDump { ctx, dir, dump, .. } = at;
        let DeviceCheck {
            name,
            kind,
            mtu,
            min_mtu,
            state,
            master,
            address,
            mac,
            vni,
            port,
            local,
            hairpin,
            learning,
            isolated,
        } = device;
        let name = self.required_text(name, ctx)?;
        let wanted = DeviceWanted {
            kind: self.optional_text(kind.as_ref(), ctx)?,
            mtu: self.optional_text(mtu.as_ref(), ctx)?,
            min_mtu: self.optional_number(min_mtu.as_ref(), ctx)?,
            state: *state,
            master: self.optional_text(master.as_ref(), ctx)?,
            address: self.optional_text(address.as_ref(), ctx)?,
            mac: self.optional_text(mac.as_ref(), ctx)?,
            vxlan: VxlanWanted {
                vni: self.optional_text(vni.as_ref(), ctx)?,
                port: self.optional_text(port.as_ref(), ctx)?,
                local: self.optional_text(local.as_ref(), ctx)?,
            },
            port: BridgePortWanted {
                hairpin: self.optional_bool(hairpin.as_ref(), ctx)?,
                learning: self.optional_bool(learning.as_ref(), ctx)?,
                isolated: self.optional_bool(isolated.as_ref(), ctx)?,
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
            let mut wrong = wanted.compare(link);
            let mut evidence = Vec::new();
            if !wrong.is_empty() {
                evidence.push(at.element(DumpFile::IpLink, links, Some(link)));
            }
            // An address is `ip-addr.json`'s to show, not `ip-link.json`'s.
            if let (Some(address), Some(addrs)) = (&wanted.address, addrs) {
                let entry = addrs.iter().find(|a| a.ifname == link.ifname);
                if let Some(held) = address_wrong(address, entry) {
                    wrong.push(held);
                    evidence.push(at.element(DumpFile::IpAddr, addrs, entry));
                }
            }
            if !wrong.is_empty() {
                failures.push(Failure {
                    actual: format!("{}: {}", link.ifname, wrong.join(", ")),
                    expected: described(&link.ifname),
                    evidence,
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
    min_mtu: Option<u32>,
    state: Option<DeviceState>,
    master: Option<String>,
    address: Option<String>,
    mac: Option<String>,
    vxlan: VxlanWanted,
    port: BridgePortWanted,
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
        if let Some(least) = self.min_mtu {
            expected.push(format!("mtu at least {least}"));
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
        self.port.describe(&mut expected);
        if let Some(mac) = &self.mac {
            expected.push(format!("MAC {mac}"));
        }
        if let Some(address) = &self.address {
            expected.push(format!("address {address}"));
        }
        expected
    }

    /// What `link` has wrong, as `ip-link.json` shows it (its address is
    /// [`address_wrong`]'s).
    fn compare(&self, link: &Link) -> Vec<String> {
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
        if let Some(least) = self.min_mtu
            && link.mtu < least
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
        self.port.compare(link, &mut wrong);
        if let Some(mac) = &self.mac {
            let own = link.address.as_ref().map(lladdr_text);
            if !own
                .as_deref()
                .is_some_and(|own| own.eq_ignore_ascii_case(mac))
            {
                wrong.push(format!("MAC {}", own.as_deref().unwrap_or("none")));
            }
        }
        wrong
    }
}

/// What a device's `entry` of `ip-addr.json` holds instead of `address`
/// (`IP/LEN` wants that prefix length too, `IP` any), or `None` when it
/// holds it. An IPv6 link-local address, which the kernel gives every
/// IPv6-enabled device, is neither held against it nor shown, unless the
/// check asks for one.
fn address_wrong(address: &str, entry: Option<&InterfaceAddrs>) -> Option<String> {
    let ip = address.split('/').next().unwrap_or(address);
    let asks_link_local = matches!(ip.parse(), Ok(IpAddr::V6(v6)) if v6.is_unicast_link_local());
    let held: Vec<String> = entry
        .into_iter()
        .flat_map(|a| &a.addresses)
        .filter(|a| {
            asks_link_local || !matches!(a.local, IpAddr::V6(v6) if v6.is_unicast_link_local())
        })
        .map(|a| format!("{}/{}", a.local, a.network.prefix_len()))
        .collect();
    let holds = held
        .iter()
        .any(|h| h == address || (!address.contains('/') && h.split('/').next() == Some(ip)));
    match (holds, held.is_empty()) {
        (true, _) => None,
        (false, true) => Some("no address".to_owned()),
        (false, false) => Some(format!("address {}", held.join(", "))),
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

/// What a device check wants of a bridge port; `None` is not checked.
struct BridgePortWanted {
    hairpin: Option<bool>,
    learning: Option<bool>,
    isolated: Option<bool>,
}

impl BridgePortWanted {
    fn settings(&self) -> [(&'static str, Option<bool>); 3] {
        [
            ("hairpin", self.hairpin),
            ("learning", self.learning),
            ("isolated", self.isolated),
        ]
    }

    /// What is wanted, for the finding's `expected`.
    fn describe(&self, expected: &mut Vec<String>) {
        for (name, wanted) in self.settings() {
            if let Some(on) = wanted {
                expected.push(format!("{name} {}", on_off(on)));
            }
        }
    }

    /// Adds what `link` has wrong to `wrong`. A setting the dump does not
    /// show (older iproute2) is not held against it.
    fn compare(&self, link: &Link, wrong: &mut Vec<String>) {
        if self.settings().iter().all(|(_, wanted)| wanted.is_none()) {
            return;
        }
        let Some(LinkPort::Bridge(port)) = link.port() else {
            wrong.push("not a bridge port".to_owned());
            return;
        };
        let found = [port.hairpin, port.learning, port.isolated];
        for ((name, wanted), found) in self.settings().into_iter().zip(found) {
            if let (Some(wanted), Some(found)) = (wanted, found)
                && wanted != found
            {
                wrong.push(format!("{name} {}", on_off(found)));
            }
        }
    }
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
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

    /// eth0 of `ip -j addr show` with 10.0.0.5/24 and its link-local address.
    fn eth0() -> InterfaceAddrs {
        serde_json::from_str(
            r#"{"ifindex": 2, "ifname": "eth0", "addr_info": [
                {"family": "inet", "local": "10.0.0.5", "prefixlen": 24, "scope": "global"},
                {"family": "inet6", "local": "fe80::1", "prefixlen": 64, "scope": "link"}]}"#,
        )
        .expect("an ip-addr entry")
    }

    #[test]
    fn an_address_failure_ignores_the_ipv6_link_local_address_unless_asked() {
        let eth0 = eth0();
        assert_eq!(address_wrong("10.0.0.5", Some(&eth0)), None);
        assert_eq!(address_wrong("10.0.0.5/24", Some(&eth0)), None);
        assert_eq!(
            address_wrong("10.0.0.6", Some(&eth0)).as_deref(),
            Some("address 10.0.0.5/24")
        );
        assert_eq!(address_wrong("fe80::1", Some(&eth0)), None);
        assert_eq!(
            address_wrong("fe80::2/64", Some(&eth0)).as_deref(),
            Some("address 10.0.0.5/24, fe80::1/64")
        );
        assert_eq!(
            address_wrong("10.0.0.5", None).as_deref(),
            Some("no address")
        );
    }

    #[test]
    fn glob_star_matches_any_run() {
        assert!(glob("*", "eth0"));
        assert!(glob("veth*", "veth53842afe"));
        assert!(glob("cali*x", "cali1234x"));
        assert!(!glob("veth*", "eth0"));
        assert!(glob("eth0", "eth0"));
    }
}
