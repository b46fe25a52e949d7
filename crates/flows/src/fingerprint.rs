//! What a client's SYN says about its stack (passive OS fingerprinting, as p0f does): the
//! options it sends and in which order, its window, window scale, MSS and timestamp value.
//! Together with the IP TTL they tell apart hosts sharing one address behind a NAT (000
//! §4.2.3; docs/flows.md, "Client fingerprint").

/// The client's SYN, read from its TCP header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SynPrint {
    /// Receive window in the SYN (never scaled).
    pub window: u16,
    /// Window scale shift, if the option was sent.
    pub wscale: Option<u8>,
    /// Maximum segment size, if the option was sent.
    pub mss: Option<u16>,
    /// Timestamp value (TSval), if the option was sent.
    pub tsval: Option<u32>,
    /// The option kinds in order, p0f-like: `M` MSS, `N` NOP, `W` window scale, `S` SACK
    /// permitted, `T` timestamps, `E` end of list, `?<kind>` any other; comma-separated.
    pub options: String,
}

const EOL: u8 = 0;
const NOP: u8 = 1;
const MSS: u8 = 2;
const WSCALE: u8 = 3;
const SACK_PERMITTED: u8 = 4;
const TIMESTAMPS: u8 = 8;

impl SynPrint {
    /// Reads a SYN's window and option bytes. Malformed options (a length that runs past the
    /// header, or below 2) end the walk: what was read before is kept, nothing panics.
    pub fn parse(window: u16, options: &[u8]) -> SynPrint {
        let mut print = SynPrint { window, ..SynPrint::default() };
        let mut kinds: Vec<String> = Vec::new();
        let mut at = 0;
        while let Some(&kind) = options.get(at) {
            match kind {
                EOL => {
                    kinds.push("E".into());
                    break;
                }
                NOP => {
                    kinds.push("N".into());
                    at += 1;
                    continue;
                }
                _ => {}
            }
            let Some(len) = options.get(at + 1).map(|&l| usize::from(l)) else { break };
            let Some(body) = (len >= 2).then(|| options.get(at + 2..at + len)).flatten() else { break };
            match (kind, body) {
                (MSS, [a, b]) => {
                    print.mss = Some(u16::from_be_bytes([*a, *b]));
                    kinds.push("M".into());
                }
                (WSCALE, [shift]) => {
                    print.wscale = Some(*shift);
                    kinds.push("W".into());
                }
                (SACK_PERMITTED, []) => kinds.push("S".into()),
                (TIMESTAMPS, [a, b, c, d, ..]) if body.len() == 8 => {
                    print.tsval = Some(u32::from_be_bytes([*a, *b, *c, *d]));
                    kinds.push("T".into());
                }
                _ => kinds.push(format!("?{kind}")),
            }
            at += len;
        }
        print.options = kinds.join(",");
        print
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_syn_options() {
        // Linux: MSS 1460, SACK permitted, timestamps (TSval 0x01020304), NOP, window scale 7.
        let bytes = [2, 4, 5, 180, 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0, 1, 3, 3, 7];
        let p = SynPrint::parse(64240, &bytes);
        assert_eq!(p.options, "M,S,T,N,W");
        assert_eq!((p.window, p.wscale, p.mss, p.tsval), (64240, Some(7), Some(1460), Some(0x01020304)));
    }

    #[test]
    fn windows_like_syn_without_timestamps() {
        let bytes = [2, 4, 5, 180, 1, 3, 3, 8, 1, 1, 4, 2];
        let p = SynPrint::parse(65535, &bytes);
        assert_eq!(p.options, "M,N,W,N,N,S");
        assert_eq!((p.wscale, p.tsval), (Some(8), None));
    }

    #[test]
    fn malformed_options_stop_the_walk_without_panicking() {
        assert_eq!(SynPrint::parse(1, &[2, 4, 5]).options, "");
        assert_eq!(SynPrint::parse(1, &[1, 3, 0]).options, "N");
        assert_eq!(SynPrint::parse(1, &[1, 3, 1]).options, "N");
        assert_eq!(SynPrint::parse(1, &[3, 3, 2, 0]).options, "W,E");
        assert_eq!(SynPrint::parse(1, &[99, 2, 1]).options, "?99,N");
        assert_eq!(SynPrint::parse(1, &[]).options, "");
    }
}
