//! One namespace's kernel model — its FIB, its netfilter rules and its IPVS
//! services — built once from its dump and shared by everything that asks
//! about the namespace: the path walker, the packs' host API and the CLI.
//! [`Modelled::model`] is that cache: the model is built the first time a
//! snapshot's namespace is asked for it, and kept in its `NetnsEntry`.

use std::sync::Arc;

use super::ipvs::Ipvs;
use super::netfilter::Netfilter;
use super::routing::Fib;
use crate::net::Family;
use crate::snapshot::NetnsEntry;
use crate::snapshot::netns::{DumpFile, NetnsDump};

/// The dump files netfilter's rules are read from.
const RULESET_FILES: [DumpFile; 3] = [
    DumpFile::IptablesSave,
    DumpFile::Ip6tablesSave,
    DumpFile::NftRuleset,
];

/// What the kernel does with packets in one namespace, as far as its dump
/// tells: each part `None` where the files it is built from were not
/// collected.
#[derive(Debug)]
pub struct Namespace<'a> {
    /// The IPv4 and the IPv6 FIB (policy rules, routes and addresses: see
    /// [`Fib::files`]), by [`Namespace::fib`].
    fibs: [Option<Fib<'a>>; 2],
    /// iptables, ip6tables and nftables rules, whichever were collected;
    /// `None` also when one of them is there but unreadable or read with
    /// problems, since the others alone are not the whole truth.
    pub netfilter: Option<Netfilter<'a>>,
    /// IPVS virtual services (`ipvsadm.txt`).
    pub ipvs: Option<Ipvs<'a>>,
}

impl<'a> Namespace<'a> {
    pub fn from_dump(dump: &'a NetnsDump) -> Namespace<'a> {
        let rulesets_readable = !RULESET_FILES
            .iter()
            .any(|file| dump.state(*file).is_damaged());
        Namespace {
            fibs: [Family::Ipv4, Family::Ipv6].map(|family| Fib::from_dump(dump, family)),
            netfilter: rulesets_readable
                .then(|| Netfilter::from_dump(dump))
                .flatten(),
            ipvs: dump.ipvs.as_ref().map(Ipvs::new),
        }
    }
}

impl<'a> Namespace<'a> {
    /// The FIB packets of `family` are routed by, where its files were read.
    pub fn fib(&self, family: Family) -> Option<&Fib<'a>> {
        self.fibs.iter().flatten().find(|fib| fib.family == family)
    }
}

self_cell::self_cell!(
    /// A namespace dump together with its [`Namespace`] model, so that the
    /// model can be kept beside the dump it borrows from.
    pub struct ModelledDump {
        owner: Arc<NetnsDump>,
        #[covariant]
        dependent: Namespace,
    }
    impl {Debug}
);

impl ModelledDump {
    /// Builds the model of `dump`.
    pub fn build(dump: Arc<NetnsDump>) -> ModelledDump {
        ModelledDump::new(dump, |dump| Namespace::from_dump(dump))
    }

    pub fn model(&self) -> &Namespace<'_> {
        self.borrow_dependent()
    }
}

/// A snapshot's namespace and its kernel model, built once per snapshot and
/// shared by every reader (the walker, the packs' host API, every flow of
/// `skoop matrix`); `NetnsEntry::dump_mut` drops it, so that it is built
/// anew from the changed dump.
pub trait Modelled {
    /// The namespace's FIB, netfilter and IPVS, built once.
    fn model(&self) -> &Namespace<'_>;
}

impl Modelled for NetnsEntry {
    fn model(&self) -> &Namespace<'_> {
        self.built_once(ModelledDump::build)
            .expect("a namespace's entry keeps its kernel model and nothing else")
            .model()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::netstack::routing::{FlowKey, LookupOutcome};

    fn node_1() -> NetnsDump {
        let (dump, problems) =
            NetnsDump::load(Path::new("examples/flannel-vxlan/nodes/node-1/host"));
        assert!(problems.is_empty(), "{problems:?}");
        dump
    }

    #[test]
    fn a_full_dump_has_every_model_and_a_partial_one_only_what_its_files_allow() {
        let dump = node_1();
        let model = Namespace::from_dump(&dump);
        let fib = model
            .fib(Family::Ipv4)
            .expect("routes, rules and addresses were collected");
        assert!(matches!(
            fib.lookup(&FlowKey::to("10.244.2.3".parse().unwrap()))
                .outcome,
            LookupOutcome::Routed { .. }
        ));
        assert!(model.netfilter.is_some());

        let mut without_rules = dump.clone();
        without_rules.rules = None;
        without_rules.iptables = None;
        let model = Namespace::from_dump(&without_rules);
        assert!(
            model.fib(Family::Ipv4).is_none(),
            "no FIB without ip-rule.json"
        );
        assert!(model.netfilter.is_none(), "no netfilter without a ruleset");
    }

    #[test]
    fn an_unreadable_ruleset_leaves_netfilter_unknown_though_the_other_was_read() {
        let mut dump = node_1();
        assert!(dump.iptables.is_some());
        dump.unreadable.insert(
            DumpFile::NftRuleset,
            crate::snapshot::Problem::in_file(Path::new(DumpFile::NftRuleset.name()), "not JSON"),
        );
        assert!(Namespace::from_dump(&dump).netfilter.is_none());
    }

    #[test]
    fn a_namespace_model_is_built_once_and_anew_when_its_dump_changes() {
        let dir = std::path::PathBuf::from("examples/flannel-vxlan/nodes/node-1/host");
        let mut entry = NetnsEntry::new(dir, node_1());
        let first: *const Namespace<'_> = entry.model();
        assert!(
            std::ptr::eq(first, entry.model()),
            "the same model, not rebuilt"
        );
        assert!(entry.model().netfilter.is_some());

        entry.dump_mut().iptables = None;
        assert!(
            entry.model().netfilter.is_none(),
            "the model follows the changed dump"
        );
        // A copy shares the dump and builds its own model.
        let copy = entry.clone();
        assert!(std::ptr::eq(copy.dump(), entry.dump()));
        assert!(copy.model().netfilter.is_none());
    }

    #[test]
    fn a_modelled_dump_keeps_its_model_beside_the_dump() {
        let modelled = ModelledDump::build(Arc::new(node_1()));
        let first: *const Namespace<'_> = modelled.model();
        assert!(std::ptr::eq(first, modelled.model()), "built once");
        assert!(modelled.model().fib(Family::Ipv4).is_some());
    }
}
