//! The flow's own packets, sent from its source namespace with the standard
//! tools (`nc`, `ping`), and the kernel's answer read from what they say.
//!
//! At most two packets leave: a TCP connect's SYN and, after a second, its
//! one retransmission, within `nc -w 2` (and where it connects, its
//! handshake's ACK and its close); one UDP datagram; two ICMP echo requests
//! 0.2 s apart, of `--size` with DF where it is given. Nothing else is
//! sent, and nothing is listened on.

use std::net::IpAddr;
use std::time::Duration;

use crate::collect::command::RunError;
use crate::collect::shell::NodeShell;
use crate::net::{Family, Protocol};

/// How long a probe may take before it is killed: the tools' own timeouts
/// are 2 s, the rest is the way to the node.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// What is sent: the flow's protocol, destination and port, and the source
/// port it is sent from (TCP and UDP), so that its conntrack entries can be
/// told from others'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub protocol: Protocol,
    pub dst: IpAddr,
    pub dport: Option<u16>,
    pub sport: Option<u16>,
    /// A ping's size (the IP packet's bytes, with DF set), as `--size`
    /// walks it; `None`: the tool's default, small.
    pub size: Option<u32>,
}

/// What the kernel did with the probe, as the sending side sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kernel {
    /// A TCP connect completed.
    Connected,
    /// A TCP connect was answered with a reset (nothing listening, or a
    /// `REJECT --reject-with tcp-reset`), or a UDP datagram with an ICMP
    /// port unreachable.
    Refused,
    /// An established connection was reset.
    Reset,
    /// No answer within the probe's time.
    TimedOut,
    /// An ICMP echo request was answered.
    Replied,
    /// An error the sender's kernel reported: an ICMP error (its type, and
    /// who sent it where `ping` says), or a local one (no route), in the
    /// tool's words.
    Unreachable(String),
    /// A UDP datagram left without an error; whether it was delivered is
    /// what the destination's counters say (`UdpInDatagrams`).
    Sent,
    /// The probe could not be sent or its answer not read.
    Unknown(String),
}

impl Kernel {
    /// The contract's word for it (`docs/json.md`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Kernel::Connected => "connected",
            Kernel::Refused => "refused",
            Kernel::Reset => "reset",
            Kernel::TimedOut => "timed_out",
            Kernel::Replied => "replied",
            Kernel::Unreachable(_) => "unreachable",
            Kernel::Sent => "sent",
            Kernel::Unknown(_) => "unknown",
        }
    }

    /// What the tool said, where the word alone does not.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Kernel::Unreachable(detail) | Kernel::Unknown(detail) => Some(detail),
            _ => None,
        }
    }

    /// Whether the flow works by the sender's answer alone; `None` for a
    /// datagram (its destination's counters say) and an unknown answer.
    pub fn delivers(&self) -> Option<bool> {
        match self {
            Kernel::Connected | Kernel::Replied => Some(true),
            Kernel::Refused | Kernel::Reset | Kernel::TimedOut | Kernel::Unreachable(_) => {
                Some(false)
            }
            Kernel::Sent | Kernel::Unknown(_) => None,
        }
    }
}

impl Probe {
    /// The command that sends it, and what it reads on its standard input.
    pub fn command(&self) -> Result<(Vec<String>, Option<&'static [u8]>), String> {
        let family = match Family::of(self.dst) {
            Family::Ipv4 => "-4",
            Family::Ipv6 => "-6",
        };
        let dst = self.dst.to_string();
        let ports = || -> Result<(String, String), String> {
            let dport = self.dport.ok_or("the flow has no destination port")?;
            let sport = self.sport.ok_or("the probe has no source port")?;
            Ok((dport.to_string(), sport.to_string()))
        };
        match self.protocol {
            Protocol::Tcp => {
                let (dport, sport) = ports()?;
                let argv = [
                    "nc", family, "-z", "-v", "-w", "2", "-p", &sport, &dst, &dport,
                ];
                Ok((words(&argv), None))
            }
            Protocol::Udp => {
                let (dport, sport) = ports()?;
                let argv = ["nc", family, "-u", "-w", "1", "-p", &sport, &dst, &dport];
                Ok((words(&argv), Some(b"x")))
            }
            Protocol::Icmp | Protocol::Icmpv6 => {
                let mut argv = words(&["ping", family, "-n", "-c", "2", "-i", "0.2", "-W", "2"]);
                if let Some(size) = self.size {
                    // -s is the ICMP payload: less the IP and ICMP headers.
                    let headers = if self.dst.is_ipv6() { 48 } else { 28 };
                    let payload = size
                        .checked_sub(headers)
                        .ok_or("a packet too small to ping")?;
                    argv.extend(words(&["-M", "do", "-s", &payload.to_string()]));
                }
                argv.push(dst);
                Ok((argv, None))
            }
            other => Err(format!("skoop cannot send {other} packets")),
        }
    }

    /// The program that sends it (its process is where a path of veths
    /// and bridges runs in the kernel).
    pub fn tool(&self) -> &'static str {
        match self.protocol {
            Protocol::Icmp | Protocol::Icmpv6 => "ping",
            _ => "nc",
        }
    }

    /// The probe in words: `a tcp connect to 10.244.2.3:8080 (source port
    /// 61234, nc -z -w 2)`.
    pub fn describe(&self) -> String {
        let to = match self.dport {
            Some(port) if self.dst.is_ipv6() => format!("[{}]:{port}", self.dst),
            Some(port) => format!("{}:{port}", self.dst),
            None => self.dst.to_string(),
        };
        let from = self
            .sport
            .map(|port| format!("source port {port}, "))
            .unwrap_or_default();
        match self.protocol {
            Protocol::Tcp => format!("a tcp connect to {to} ({from}nc -z -w 2)"),
            Protocol::Udp => format!("one udp datagram to {to} ({from}nc -u)"),
            _ => match self.size {
                Some(size) => format!(
                    "2 icmp echo requests of {size} bytes with DF to {to} (ping -c 2 -M do)"
                ),
                None => format!("2 icmp echo requests to {to} (ping -c 2)"),
            },
        }
    }

    /// Sends the probe through `shell` after `enter` (the words that enter
    /// the source's namespace) and reads the kernel's answer.
    pub async fn send(&self, shell: &NodeShell, enter: &[String]) -> Kernel {
        let (argv, stdin) = match self.command() {
            Ok(command) => command,
            Err(why) => return Kernel::Unknown(why),
        };
        match shell.run(enter, &argv, stdin, PROBE_TIMEOUT).await {
            Ok(output) => {
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
                classify(self.protocol, output.code, &text)
            }
            Err(RunError::ToolMissing { tool }) => Kernel::Unknown(format!(
                "`{tool}` is not installed where the source's commands run"
            )),
            Err(e) => Kernel::Unknown(format!("the probe did not run: {e}")),
        }
    }
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| w.to_string()).collect()
}

/// The kernel's answer from what `nc` (OpenBSD's) or `ping` (iputils')
/// printed and its exit code.
pub fn classify(protocol: Protocol, code: Option<i32>, text: &str) -> Kernel {
    let said = |words: &str| text.contains(words);
    match protocol {
        Protocol::Icmp | Protocol::Icmpv6 => {
            if code == Some(0) {
                return Kernel::Replied;
            }
            // `From 10.244.2.1 icmp_seq=1 Destination Host Unreachable`.
            if let Some(line) = text.lines().find(|line| line.starts_with("From ")) {
                let mut parts = line.splitn(4, ' ');
                let who = parts.nth(1).unwrap_or_default();
                let what = parts.nth(1).unwrap_or_default().trim();
                return Kernel::Unreachable(format!("{what} (ICMP from {who})"));
            }
            // `ping: connect: Network is unreachable`; `ping: local error:
            // message too long, mtu=1400` (DF, larger than the device).
            let local = ["ping: connect: ", "ping: local error: "];
            let error = (text.lines())
                .find_map(|line| local.iter().find_map(|prefix| line.strip_prefix(prefix)));
            if let Some(error) = error {
                return Kernel::Unreachable(error.trim().to_string());
            }
            match code {
                Some(1) => Kernel::TimedOut,
                _ => Kernel::Unknown(first_line(text)),
            }
        }
        _ => {
            if said("Connection refused") {
                Kernel::Refused
            } else if said("Connection reset") {
                Kernel::Reset
            } else if said("timed out") {
                Kernel::TimedOut
            } else if let Some(error) = ["No route to host", "Network is unreachable"]
                .into_iter()
                .chain(["Operation not permitted", "Permission denied"])
                .chain(["Message too long", "Protocol not available"])
                .find(|error| said(error))
            {
                Kernel::Unreachable(error.to_string())
            } else if protocol == Protocol::Udp {
                Kernel::Sent
            } else if code == Some(0) {
                Kernel::Connected
            } else {
                Kernel::Unknown(first_line(text))
            }
        }
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line: String = line.chars().take(200).collect();
    if line.is_empty() {
        "the tool said nothing".into()
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // What OpenBSD nc 1.219 and iputils ping 20221126 print, taken from runs
    // between two network namespaces.
    #[test]
    fn nc_and_ping_answers_are_the_kernels() {
        let tcp = |code, text| classify(Protocol::Tcp, Some(code), text);
        assert_eq!(
            tcp(
                0,
                "Connection to 10.9.0.2 8080 port [tcp/http-alt] succeeded!"
            ),
            Kernel::Connected
        );
        assert_eq!(
            tcp(
                1,
                "nc: connect to 10.9.0.2 port 8081 (tcp) failed: Connection refused"
            ),
            Kernel::Refused
        );
        assert_eq!(
            tcp(
                1,
                "nc: connect to 10.9.0.2 port 8082 (tcp) timed out: Operation now in progress"
            ),
            Kernel::TimedOut
        );
        assert_eq!(
            tcp(
                1,
                "nc: connect to 10.9.0.2 port 8083 (tcp) failed: No route to host"
            ),
            Kernel::Unreachable("No route to host".into())
        );
        let ping = |code, text| classify(Protocol::Icmp, Some(code), text);
        assert_eq!(
            ping(
                1,
                "PING 10.9.0.2 (10.9.0.2) 56(84) bytes of data.\n\
                 From 10.9.0.2 icmp_seq=1 Destination Port Unreachable\n"
            ),
            Kernel::Unreachable("Destination Port Unreachable (ICMP from 10.9.0.2)".into())
        );
        assert_eq!(
            ping(2, "ping: connect: Network is unreachable"),
            Kernel::Unreachable("Network is unreachable".into())
        );
        assert_eq!(
            ping(1, "ping: local error: message too long, mtu=1400"),
            Kernel::Unreachable("message too long, mtu=1400".into())
        );
        assert_eq!(
            ping(1, "PING 10.9.0.2\n\n--- statistics ---"),
            Kernel::TimedOut
        );
        assert_eq!(ping(0, ""), Kernel::Replied);
        assert_eq!(classify(Protocol::Udp, Some(1), ""), Kernel::Sent);
        assert!(matches!(tcp(1, ""), Kernel::Unknown(_)));
    }

    #[test]
    fn the_probe_sends_the_flows_packets_only() {
        let probe = Probe {
            protocol: Protocol::Tcp,
            dst: "10.244.2.3".parse().unwrap(),
            dport: Some(8080),
            sport: Some(40123),
            size: None,
        };
        let (argv, stdin) = probe.command().unwrap();
        assert_eq!(argv.join(" "), "nc -4 -z -v -w 2 -p 40123 10.244.2.3 8080");
        assert_eq!(stdin, None);
        let probe = Probe {
            protocol: Protocol::Icmpv6,
            dst: "fd00::3".parse().unwrap(),
            dport: None,
            sport: None,
            size: None,
        };
        assert_eq!(
            probe.command().unwrap().0.join(" "),
            "ping -6 -n -c 2 -i 0.2 -W 2 fd00::3"
        );
        let sized = Probe {
            size: Some(1500),
            ..probe.clone()
        };
        assert_eq!(
            sized.command().unwrap().0.join(" "),
            "ping -6 -n -c 2 -i 0.2 -W 2 -M do -s 1452 fd00::3"
        );
        let sctp = Probe {
            protocol: Protocol::Sctp,
            ..probe
        };
        assert!(sctp.command().is_err());
    }
}
