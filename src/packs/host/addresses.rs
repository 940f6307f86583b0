//! The address values scripts compute with: `Ip` and `Cidr`.

use std::net::IpAddr;

use ipnet::IpNet;
use rhai::{Dynamic, Engine};

use super::{Fallible, as_ip, fail, parse_cidr, parse_ip};

pub(super) fn register(engine: &mut Engine) {
    engine
        .register_type_with_name::<IpAddr>("Ip")
        .register_fn("ip", parse_ip)
        .register_fn("to_string", |ip: &mut IpAddr| ip.to_string())
        .register_fn("to_debug", |ip: &mut IpAddr| ip.to_string())
        .register_fn("==", |a: IpAddr, b: IpAddr| a == b)
        .register_fn("!=", |a: IpAddr, b: IpAddr| a != b)
        .register_get("is_ipv4", |ip: &mut IpAddr| ip.is_ipv4());
    engine
        .register_type_with_name::<IpNet>("Cidr")
        .register_fn("cidr", parse_cidr)
        .register_fn("to_string", |net: &mut IpNet| net.to_string())
        .register_fn("to_debug", |net: &mut IpNet| net.to_string())
        .register_fn("==", |a: IpNet, b: IpNet| a == b)
        .register_fn("!=", |a: IpNet, b: IpNet| a != b)
        .register_fn("contains", |net: &mut IpNet, ip: Dynamic| {
            as_ip(&ip).map(|ip| net.contains(&ip))
        })
        .register_fn("contains_net", |net: &mut IpNet, other: IpNet| {
            net.contains(&other)
        })
        .register_get("prefix_len", |net: &mut IpNet| i64::from(net.prefix_len()))
        .register_get("network", |net: &mut IpNet| net.network())
        .register_get("broadcast", |net: &mut IpNet| net.broadcast())
        .register_fn("nth_host", nth_host);
}

/// The `n`th address of `net` counted from its network address (0 is the
/// network address itself), as Flannel and Calico number gateways.
pub(super) fn nth_host(net: &mut IpNet, n: i64) -> Fallible<IpAddr> {
    let Ok(n) = u128::try_from(n) else {
        return fail(format!("nth_host({n}): n must not be negative"));
    };
    let size = 1u128 << (net.max_prefix_len() - net.prefix_len()).min(127);
    if n >= size {
        return fail(format!("nth_host({n}): {net} has {size} addresses"));
    }
    Ok(match net.network() {
        IpAddr::V4(base) => IpAddr::from(std::net::Ipv4Addr::from(
            (u128::from(u32::from(base)) + n) as u32,
        )),
        IpAddr::V6(base) => IpAddr::from(std::net::Ipv6Addr::from(u128::from(base) + n)),
    })
}
