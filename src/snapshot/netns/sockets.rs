//! `ss -H -tulnS`: the TCP, UDP and SCTP sockets waiting for packets.
//!
//! Each line is `Netid State Recv-Q Send-Q Local:Port Peer:Port`, columns
//! separated by spaces. The peer (always a wildcard for these sockets) must
//! read as an address and a port, or `*`, so that two lines run together
//! (a lost newline) are an issue, not the first line alone; any further
//! columns (`users:(...)`) are ignored.
//!
//! SCTP came later: the contract was `ss -H -tuln`, which lists no SCTP
//! socket, and such a dump reads exactly like one of a namespace where no
//! SCTP socket listens. So only an `sctp` line proves that a dump lists SCTP
//! at all ([`lists`]); without one, whether anything listens on SCTP is
//! unknown, never "nothing" (see [`SCTP_UNLISTED`]). An SCTP endpoint
//! listening on several addresses (`sctp_bindx`) shows only one of them on
//! its line: the others are in `ss -i`'s `locals:`, which is not collected.

use std::net::IpAddr;

use super::keyword::keyword_enum;
use crate::net::Protocol;
use crate::snapshot::problem::{ParseIssue, Parsed};

/// The state of a socket of `protocol` that takes new packets: a listening
/// TCP or SCTP socket, a bound UDP one; `None` for a protocol without
/// sockets of its own (ICMP's echo requests are the kernel's to answer).
pub fn waiting_state(protocol: Protocol) -> Option<SocketState> {
    match protocol {
        Protocol::Tcp | Protocol::Sctp => Some(SocketState::Listen),
        Protocol::Udp => Some(SocketState::Unconn),
        _ => None,
    }
}

/// Whether a dump says anything of `protocol`'s sockets: of TCP and UDP
/// always; of SCTP only when it has an SCTP socket, since a dump of
/// `ss -H -tuln` (the contract before SCTP) lists none whatever listens.
pub fn lists(sockets: &[ListeningSocket], protocol: Protocol) -> bool {
    protocol != Protocol::Sctp || sockets.iter().any(|s| s.protocol == protocol)
}

/// Why a dump that [`lists`] no SCTP socket cannot say that nothing listens
/// on an SCTP port.
pub const SCTP_UNLISTED: &str = "ss.txt lists no SCTP socket at all, and a dump made without SCTP (`ss -H -tuln`, as skoop collected before `ss -H -tulnS`) lists none either, whatever listens";

keyword_enum! {
    pub enum SocketState {
        /// A TCP socket accepting connections, an SCTP endpoint accepting
        /// associations.
        Listen = "LISTEN",
        /// A bound UDP socket.
        Unconn = "UNCONN",
    }
}

/// The address a socket is bound to, as ss prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalAddress {
    /// `*`: a dual-stack IPv6 socket, bound to every address of both families.
    AnyDualStack,
    /// One address; `0.0.0.0` is every IPv4 address and `[::]` every IPv6
    /// address (an IPv6-only socket).
    Ip(IpAddr),
}

/// One listening socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListeningSocket {
    pub protocol: Protocol,
    pub state: SocketState,
    pub recv_q: u64,
    pub send_q: u64,
    pub address: LocalAddress,
    /// The device the socket is bound to (`127.0.0.53%lo`): it only sees
    /// packets arriving there.
    pub interface: Option<String>,
    pub port: u16,
}

/// Reads `ss -H -tulnS` output (or `ss -H -tuln`'s, of older snapshots). A line that cannot be read is an issue at
/// the column of the field that is wrong; the other lines are kept. No
/// listening socket at all is an empty, valid dump.
pub fn parse(text: &str) -> Parsed<Vec<ListeningSocket>> {
    let mut sockets = Vec::new();
    let mut issues = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(socket) => sockets.push(socket),
            Err((column, message)) => issues.push(ParseIssue::at(index + 1, column, message)),
        }
    }
    (Some(sockets), issues)
}

/// A line's failure: the 1-based column where it is, and what is wrong.
type LineError = (usize, String);

fn parse_line(line: &str) -> Result<ListeningSocket, LineError> {
    let fields = fields(line);
    let field = |n: usize, name: &str| {
        fields.get(n).copied().ok_or_else(|| {
            let end = line.chars().count() + 1;
            (end, format!("line ends before the {name} column"))
        })
    };
    let (column, netid) = field(0, "Netid")?;
    let protocol = match netid {
        "tcp" => Protocol::Tcp,
        "udp" => Protocol::Udp,
        "sctp" => Protocol::Sctp,
        _ => return Err((column, format!("{netid:?} is not tcp, udp or sctp"))),
    };
    let (_, state) = field(1, "State")?;
    let recv_q = queue(field(2, "Recv-Q")?)?;
    let send_q = queue(field(3, "Send-Q")?)?;
    let (column, local) = field(4, "Local Address:Port")?;
    let (address, interface, port) =
        local_address(local).map_err(|message| (column, format!("{local:?}: {message}")))?;
    let (column, peer) = field(5, "Peer Address:Port")?;
    peer_address(peer).map_err(|message| (column, format!("{peer:?}: {message}")))?;
    Ok(ListeningSocket {
        protocol,
        state: SocketState::from(state),
        recv_q,
        send_q,
        address,
        interface,
        port,
    })
}

/// The whitespace-separated fields of a line, each with its 1-based column.
fn fields(line: &str) -> Vec<(usize, &str)> {
    let mut fields = Vec::new();
    let mut start = None;
    for (column, (offset, c)) in line.char_indices().enumerate() {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some((column + 1, offset)),
            (true, Some((start_column, start_offset))) => {
                fields.push((start_column, &line[start_offset..offset]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some((start_column, start_offset)) = start {
        fields.push((start_column, &line[start_offset..]));
    }
    fields
}

fn queue((column, text): (usize, &str)) -> Result<u64, LineError> {
    text.parse()
        .map_err(|_| (column, format!("queue length {text:?} is not a number")))
}

/// `ADDRESS[%IFACE]:PORT`, where ADDRESS is `*`, an IPv4 address or a
/// bracketed IPv6 address. Interface names cannot contain `:`, so the port
/// follows the last one.
fn local_address(text: &str) -> Result<(LocalAddress, Option<String>, u16), String> {
    let (address, interface, port) = endpoint(text)?;
    let port = port
        .parse()
        .map_err(|_| format!("port {port:?} is not a number"))?;
    Ok((address, interface, port))
}

/// The peer: an address as the local one's, its port a number or `*`.
fn peer_address(text: &str) -> Result<(), String> {
    let (_, _, port) = endpoint(text)?;
    if port == "*" || port.parse::<u16>().is_ok() {
        Ok(())
    } else {
        Err(format!("port {port:?} is neither a number nor *"))
    }
}

/// `ADDRESS[%IFACE]:PORT` split, ADDRESS read, PORT left as text.
fn endpoint(text: &str) -> Result<(LocalAddress, Option<String>, &str), String> {
    let (host, port) = text.rsplit_once(':').ok_or("expected ADDRESS:PORT")?;
    let (address, interface) = match host.split_once('%') {
        Some((address, interface)) if !interface.is_empty() => {
            (address, Some(interface.to_owned()))
        }
        Some(_) => return Err("empty interface name after %".into()),
        None => (host, None),
    };
    let address = match address {
        "*" => LocalAddress::AnyDualStack,
        _ => {
            let bare = match address.strip_prefix('[') {
                Some(inner) => inner
                    .strip_suffix(']')
                    .ok_or("IPv6 address without its closing ]")?,
                None => address,
            };
            LocalAddress::Ip(
                bare.parse()
                    .map_err(|_| format!("{address:?} is not an address"))?,
            )
        }
    };
    Ok((address, interface, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = include_str!("../../../tests/fixtures/dumps/node/ss.txt");
    const POD: &str = include_str!("../../../tests/fixtures/dumps/pod/ss.txt");

    fn sockets(text: &str) -> Vec<ListeningSocket> {
        let (sockets, issues) = parse(text);
        assert!(issues.is_empty(), "{issues:?}");
        sockets.expect("always a value")
    }

    fn ip(text: &str) -> LocalAddress {
        LocalAddress::Ip(text.parse().expect("an address"))
    }

    /// (protocol, address, interface, port) of every socket.
    fn bound(sockets: &[ListeningSocket]) -> Vec<(Protocol, LocalAddress, Option<&str>, u16)> {
        sockets
            .iter()
            .map(|s| (s.protocol, s.address, s.interface.as_deref(), s.port))
            .collect()
    }

    #[test]
    fn every_address_form_of_the_node_is_read() {
        use Protocol::{Tcp, Udp};
        let sockets = sockets(NODE);
        let expected = [
            (Udp, ip("0.0.0.0"), None, 8472),
            (Udp, ip("127.0.0.53"), Some("lo"), 53),
            (Udp, ip("0.0.0.0"), Some("eth0"), 68),
            (Udp, ip("192.168.50.1"), None, 123),
            (Udp, ip("0.0.0.0"), None, 4789),
            (Udp, LocalAddress::AnyDualStack, None, 5353),
            (Tcp, ip("127.0.0.1"), None, 10248),
            (Tcp, ip("127.0.0.53"), Some("lo"), 53),
            (Tcp, ip("0.0.0.0"), None, 10250),
            (Tcp, ip("::1"), None, 631),
            (Tcp, ip("::"), None, 22),
            (Tcp, ip("fe80::1"), Some("eth0"), 7000),
            (Tcp, LocalAddress::AnyDualStack, None, 9100),
        ];
        // ss lists sockets in hash order, which changes from run to run.
        let found = bound(&sockets);
        assert_eq!(found.len(), expected.len());
        for socket in expected {
            assert!(found.contains(&socket), "{socket:?} not in {found:?}");
        }
    }

    #[test]
    fn tcp_sockets_listen_and_udp_sockets_are_unconnected() {
        let sockets = sockets(NODE);
        for socket in &sockets {
            assert_eq!(Some(&socket.state), waiting_state(socket.protocol).as_ref());
        }
        let kubelet = sockets
            .iter()
            .find(|s| s.port == 10250)
            .expect("kubelet port");
        assert_eq!((kubelet.recv_q, kubelet.send_q), (0, 5));
    }

    #[test]
    fn pod_listens_on_tcp_and_dual_stack_udp() {
        let pod = sockets(POD);
        let found = bound(&pod);
        assert_eq!(found.len(), 2);
        assert!(found.contains(&(Protocol::Udp, LocalAddress::AnyDualStack, None, 53)));
        assert!(found.contains(&(Protocol::Tcp, ip("0.0.0.0"), None, 8080)));
    }

    /// What `ss -H -tulnS` prints for SCTP endpoints listening (iproute2's
    /// `sock_state_print` and `inet_addr_print`: the Netid `sctp`, state
    /// LISTEN, the backlog as Send-Q, one local address, a wildcard peer).
    const SCTP: &str = "sctp LISTEN 0      128          0.0.0.0:38412      0.0.0.0:*\n\
                        sctp LISTEN 0      5                  *:36412            *:*\n\
                        sctp LISTEN 0      10     [fd00::7]%eth0:2905             [::]:*\n\
                        tcp  LISTEN 0      4096         0.0.0.0:22         0.0.0.0:*\n";

    #[test]
    fn sctp_endpoints_are_read_as_listening_sockets() {
        let sockets = sockets(SCTP);
        assert_eq!(
            bound(&sockets),
            [
                (Protocol::Sctp, ip("0.0.0.0"), None, 38412),
                (Protocol::Sctp, LocalAddress::AnyDualStack, None, 36412),
                (Protocol::Sctp, ip("fd00::7"), Some("eth0"), 2905),
                (Protocol::Tcp, ip("0.0.0.0"), None, 22),
            ]
        );
        for socket in &sockets {
            assert_eq!(socket.state, SocketState::Listen);
        }
        assert_eq!((sockets[0].recv_q, sockets[0].send_q), (0, 128));
    }

    #[test]
    fn only_an_sctp_line_proves_a_dump_lists_sctp() {
        // The contract's old `ss -H -tuln` never printed SCTP: a dump without
        // an SCTP line may be one of those, and says nothing of SCTP.
        for old in [NODE, POD, ""] {
            let sockets = sockets(old);
            assert!(!lists(&sockets, Protocol::Sctp));
            assert!(lists(&sockets, Protocol::Tcp));
            assert!(lists(&sockets, Protocol::Udp));
        }
        assert!(lists(&sockets(SCTP), Protocol::Sctp));
        assert!(SCTP_UNLISTED.contains("ss -H -tulnS"));
    }

    #[test]
    fn an_sctp_association_line_is_not_a_listener() {
        // Without -l ss prints an endpoint's associations under it; -l never
        // does, so such a line is not of the contract.
        let text = "sctp LISTEN 0 128 0.0.0.0:38412 0.0.0.0:*\n\
                    `- ESTAB 0 0 10.0.0.2:38412 10.0.0.9:40000\n";
        let (sockets, issues) = parse(text);
        assert_eq!(sockets.expect("always a value").len(), 1);
        assert_eq!(issues.len(), 1);
        assert_eq!(
            (issues[0].line, issues[0].column),
            (2, Some(1)),
            "{issues:?}"
        );
    }

    #[test]
    fn no_listening_socket_is_an_empty_dump() {
        assert_eq!(parse(""), (Some(vec![]), vec![]));
    }

    /// Two lines run together, the newline between them lost and bytes
    /// around it zeroed: the peer column is what shows it.
    #[test]
    fn lines_run_together_are_an_issue_not_the_first_line_alone() {
        let text = "tcp LISTEN 0      1      0.0.0.0:8080 0.\0\0\0\0EN 0      1   *:8080 *:*\n";
        let (sockets, issues) = parse(text);
        assert_eq!(sockets, Some(vec![]));
        let found: Vec<_> = issues
            .iter()
            .map(|i| (i.line, i.column.expect("a column")))
            .collect();
        assert_eq!(found, [(1, 39)], "{issues:?}");
        assert!(
            issues[0].message.contains("expected ADDRESS:PORT"),
            "{issues:?}"
        );
    }

    #[test]
    fn garbage_lines_are_issues_at_the_wrong_field_and_the_rest_is_kept() {
        let text = "Netid State  Recv-Q Send-Q Local Address:Port Peer Address:Port\n\
                    tcp LISTEN 0      4096   0.0.0.0:22 0.0.0.0:*\n\
                    tcp LISTEN x      4096   0.0.0.0:23 0.0.0.0:*\n\
                    udp UNCONN 0      0      10.0.0.300:53 0.0.0.0:*\n\
                    udp UNCONN 0      0      [::1:53 [::]:*\n\
                    tcp LISTEN 0      4096   0.0.0.0:http 0.0.0.0:*\n\
                    tcp LISTEN 0      4096\n\
                    tcp LISTEN 0      4096   *:8080 *:* users:((\"nc\",pid=1,fd=3))\n";
        let (sockets, issues) = parse(text);
        let ports: Vec<_> = sockets
            .expect("always a value")
            .iter()
            .map(|s| s.port)
            .collect();
        assert_eq!(ports, [22, 8080]);
        let found: Vec<_> = issues
            .iter()
            .map(|i| (i.line, i.column.expect("a column"), i.message.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (1, 1, r#""Netid" is not tcp, udp or sctp"#),
                (3, 12, r#"queue length "x" is not a number"#),
                (4, 26, r#""10.0.0.300:53": "10.0.0.300" is not an address"#),
                (5, 26, r#""[::1:53": IPv6 address without its closing ]"#),
                (6, 26, r#""0.0.0.0:http": port "http" is not a number"#),
                (7, 23, "line ends before the Local Address:Port column"),
            ]
        );
    }
}
