//! IPVS as the kernel applies it to a namespace's packets.
//!
//! kube-proxy's IPVS mode binds every service address to the `kube-ipvs0`
//! device, so a packet for a service is routed as local and reaches INPUT;
//! there IPVS takes the packets of its virtual services and sends each
//! connection to one real server, rewriting the destination (`-m`,
//! masquerade forwarding). Every real server that can be chosen is a branch,
//! with the share of connections its scheduler gives it.

use std::net::{IpAddr, SocketAddr};

use crate::net::Protocol;
use crate::snapshot::netns::ipvs::{
    Forwarding, IpvsConfig, RealServer, Scheduler, ServiceAddress, VirtualService,
};

/// One real server a connection can be sent to.
#[derive(Debug, Clone, PartialEq)]
pub struct Scheduled<'a> {
    pub real_server: &'a RealServer,
    /// The share of new connections the scheduler gives it.
    pub probability: f64,
}

/// What IPVS does with a packet that was routed to this namespace.
#[derive(Debug, Clone, PartialEq)]
pub enum IpvsOutcome<'a> {
    /// No virtual service takes it: it goes on to the sockets.
    NotVirtual,
    /// A virtual service takes it and sends it to one of these.
    Scheduled {
        service: &'a VirtualService,
        choices: Vec<Scheduled<'a>>,
    },
    /// A virtual service takes it but has no real server with a weight: the
    /// connection is refused.
    NoRealServer { service: &'a VirtualService },
    /// The model cannot tell; the reason says why.
    Unknown { reason: String },
}

/// The virtual services of one namespace.
#[derive(Debug, Clone, Copy)]
pub struct Ipvs<'a> {
    config: &'a IpvsConfig,
}

impl<'a> Ipvs<'a> {
    pub fn new(config: &'a IpvsConfig) -> Ipvs<'a> {
        Ipvs { config }
    }

    /// Schedules a new connection of `protocol` to `dst` (a firewall-mark
    /// service matches the packet's `mark`; IPVS schedules TCP, UDP and SCTP
    /// by address and port, any protocol by mark).
    pub fn schedule(&self, protocol: Protocol, dst: SocketAddr, mark: u32) -> IpvsOutcome<'a> {
        let by_address = match protocol {
            Protocol::Tcp => Some(ServiceAddress::Tcp(dst)),
            Protocol::Udp => Some(ServiceAddress::Udp(dst)),
            Protocol::Sctp => Some(ServiceAddress::Sctp(dst)),
            _ => None,
        };
        let ipv6 = matches!(dst.ip(), IpAddr::V6(_));
        let by_address = by_address.and_then(|address| self.config.service(&address));
        let service = by_address.or_else(|| {
            self.config.services.iter().find(|s| {
                matches!(s.address, ServiceAddress::FirewallMark { mark: m, ipv6: v6 } if m == mark && mark != 0 && v6 == ipv6)
            })
        });
        let Some(service) = service else {
            return IpvsOutcome::NotVirtual;
        };
        let mut usable: Vec<&RealServer> = service
            .real_servers
            .iter()
            .filter(|r| r.weight > 0)
            .collect();
        if service.scheduler == Scheduler::WeightedFailover {
            // Failover sends everything to the heaviest server(s).
            let heaviest = usable.iter().map(|r| r.weight).max().unwrap_or(0);
            usable.retain(|r| r.weight == heaviest);
        }
        if usable.is_empty() {
            return IpvsOutcome::NoRealServer { service };
        }
        if let Some(tunnelled) = usable
            .iter()
            .find(|r| matches!(r.forwarding, Forwarding::Tunnel(_)))
        {
            return IpvsOutcome::Unknown {
                reason: format!(
                    "IPVS tunnel forwarding (to {}) is not modelled",
                    tunnelled.address
                ),
            };
        }
        // Weighted schedulers share connections by weight; the others treat
        // every server with a weight alike.
        let weighted = matches!(
            service.scheduler,
            Scheduler::WeightedRoundRobin
                | Scheduler::WeightedLeastConnection
                | Scheduler::WeightedOverflow
        );
        let share = |server: &RealServer| {
            if weighted {
                f64::from(server.weight)
            } else {
                1.0
            }
        };
        let total: f64 = usable.iter().map(|r| share(r)).sum();
        let choices = usable
            .into_iter()
            .map(|real_server| Scheduled {
                real_server,
                probability: share(real_server) / total,
            })
            .collect();
        IpvsOutcome::Scheduled { service, choices }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::netns::ipvs::parse;

    fn ipvs(text: &str) -> IpvsConfig {
        let (config, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        config.unwrap()
    }

    fn shares(outcome: IpvsOutcome) -> Vec<(String, f64)> {
        match outcome {
            IpvsOutcome::Scheduled { choices, .. } => choices
                .iter()
                .map(|c| (c.real_server.address.to_string(), c.probability))
                .collect(),
            other => panic!("not scheduled: {other:?}"),
        }
    }

    #[test]
    fn round_robin_gives_every_weighted_server_an_equal_share() {
        let config = ipvs(
            "-A -t 10.96.0.100:80 -s rr\n\
             -a -t 10.96.0.100:80 -r 10.244.1.2:8080 -m -w 1\n\
             -a -t 10.96.0.100:80 -r 10.244.2.3:8080 -m -w 5\n\
             -a -t 10.96.0.100:80 -r 10.244.2.4:8080 -m -w 0\n",
        );
        let outcome =
            Ipvs::new(&config).schedule(Protocol::Tcp, "10.96.0.100:80".parse().unwrap(), 0);
        assert_eq!(
            shares(outcome),
            [
                ("10.244.1.2:8080".into(), 0.5),
                ("10.244.2.3:8080".into(), 0.5)
            ]
        );
    }

    #[test]
    fn weighted_round_robin_shares_by_weight() {
        let config = ipvs(
            "-A -u 10.96.0.10:53 -s wrr\n\
             -a -u 10.96.0.10:53 -r 10.244.1.3:53 -m -w 1\n\
             -a -u 10.96.0.10:53 -r 10.244.2.3:53 -m -w 3\n",
        );
        let ipvs = Ipvs::new(&config);
        let outcome = ipvs.schedule(Protocol::Udp, "10.96.0.10:53".parse().unwrap(), 0);
        assert_eq!(
            shares(outcome),
            [
                ("10.244.1.3:53".into(), 0.25),
                ("10.244.2.3:53".into(), 0.75)
            ]
        );
        // The same address over TCP is not a virtual service.
        assert_eq!(
            ipvs.schedule(Protocol::Tcp, "10.96.0.10:53".parse().unwrap(), 0),
            IpvsOutcome::NotVirtual
        );
    }

    #[test]
    fn an_sctp_virtual_service_schedules_sctp_only() {
        // kube-proxy's IPVS mode programs a Service's SCTP port so.
        let config = ipvs(
            "-A --sctp-service 10.96.0.50:38412 -s rr\n\
             -a --sctp-service 10.96.0.50:38412 -r 10.244.1.2:38412 -m -w 1\n\
             -a --sctp-service 10.96.0.50:38412 -r 10.244.2.3:38412 -m -w 1\n",
        );
        let ipvs = Ipvs::new(&config);
        let dst = "10.96.0.50:38412".parse().unwrap();
        assert_eq!(
            shares(ipvs.schedule(Protocol::Sctp, dst, 0)),
            [
                ("10.244.1.2:38412".into(), 0.5),
                ("10.244.2.3:38412".into(), 0.5)
            ]
        );
        for other in [Protocol::Tcp, Protocol::Udp] {
            assert_eq!(ipvs.schedule(other, dst, 0), IpvsOutcome::NotVirtual);
        }
    }

    #[test]
    fn a_service_without_real_servers_refuses_and_tunnels_are_unknown() {
        let config = ipvs(
            "-A -t 10.96.0.200:80 -s rr\n\
             -A -t 10.96.0.201:80 -s rr\n\
             -a -t 10.96.0.201:80 -r 10.244.1.9:80 -i -w 1\n\
             -A -f 7 -s rr\n\
             -a -f 7 -r 10.244.1.2:0 -m -w 1\n",
        );
        let ipvs = Ipvs::new(&config);
        let empty = ipvs.schedule(Protocol::Tcp, "10.96.0.200:80".parse().unwrap(), 0);
        assert!(
            matches!(empty, IpvsOutcome::NoRealServer { .. }),
            "{empty:?}"
        );
        let tunnel = ipvs.schedule(Protocol::Tcp, "10.96.0.201:80".parse().unwrap(), 0);
        assert!(matches!(tunnel, IpvsOutcome::Unknown { .. }), "{tunnel:?}");
        let marked = ipvs.schedule(Protocol::Tcp, "10.1.1.1:80".parse().unwrap(), 7);
        assert_eq!(shares(marked).len(), 1);
    }
}
