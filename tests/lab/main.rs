//! The lab: real little Kubernetes clusters built out of Linux network
//! namespaces, the ground truth skoop's answers are checked against
//! (DESIGN §6). See `tests/lab/README.md`.
//!
//! Needs root, iproute2, iptables, netcat-openbsd and ping; without root every
//! test fails saying so, unless `SKOOP_LAB=skip`.

mod apiserver;
mod calico;
mod cilium;
mod cluster;
mod collect_cli;
mod confirm;
mod diagnose;
mod flannel;
mod flannel_vxlan;
mod kindnet;
mod kube_proxy;
mod kube_router;
mod kubelet;
mod lab;
mod live;
mod netfilter;
mod nftables;
mod objects;
mod real;
mod routing;
mod routing6;
mod snapshot;
