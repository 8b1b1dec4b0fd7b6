//! A minimal blocking HTTP/1.1 client over loopback: one keep-alive connection, one request at a
//! time, `Content-Length` bodies only (what drift-sentinel and the ceiling answer). Cheap enough
//! that the load generator costs little of the two cores it shares with the server.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One keep-alive connection.
pub(crate) struct Conn {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
}

impl Conn {
    /// A connection to `addr`, opened on first use.
    pub(crate) fn new(addr: SocketAddr) -> Conn {
        Conn {
            addr,
            stream: None,
            buf: Vec::with_capacity(4096),
        }
    }

    fn stream(&mut self) -> std::io::Result<&mut TcpStream> {
        if self.stream.is_none() {
            let stream = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2))?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(Duration::from_secs(30)))?;
            self.stream = Some(stream);
        }
        match self.stream.as_mut() {
            Some(stream) => Ok(stream),
            None => Err(std::io::Error::other("no stream")),
        }
    }

    /// Sends a whole request, returns the status code and the response body.
    pub(crate) fn roundtrip(&mut self, request: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
        let result = self.try_roundtrip(request);
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    fn try_roundtrip(&mut self, request: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let stream = self.stream()?;
        stream.write_all(request)?;
        let mut chunk = [0u8; 8192];
        let header_end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let read = stream.read(&mut chunk)?;
            if read == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "connection closed",
                ));
            }
            buf.extend_from_slice(&chunk[..read]);
        };
        let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse::<u16>().ok())
            .unwrap_or(0);
        let length = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())
                    .flatten()
            })
            .unwrap_or(0);
        while buf.len() < header_end + length {
            let read = stream.read(&mut chunk)?;
            if read == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..read]);
        }
        let body = buf[header_end..(header_end + length).min(buf.len())].to_vec();
        let close = head.to_ascii_lowercase().contains("connection: close");
        self.buf = buf;
        if close {
            self.stream = None;
        }
        Ok((status, body))
    }
}

/// `GET path` on a fresh connection; the status and body.
pub(crate) fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut conn = Conn::new(addr);
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let (status, body) = conn.roundtrip(request.as_bytes())?;
    Ok((status, String::from_utf8_lossy(&body).to_string()))
}

/// A small xorshift generator for ids (no cryptographic need).
pub(crate) struct Rng(u64);

impl Rng {
    /// Seeded from the clock and `salt`.
    pub(crate) fn new(salt: u64) -> Rng {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Rng((now ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1)
    }

    /// Seeded from `seed` alone: the same seed gives the same ids on every run.
    pub(crate) fn seeded(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A fresh UUID-shaped CloudEvent id.
    pub(crate) fn id(&mut self) -> String {
        let a = self.next();
        let b = self.next();
        format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            (b >> 48) & 0xfff,
            b & 0xffff_ffff_ffff
        )
    }
}

/// The CloudEvent `time` of a request sent now, as an ApiServerSource adapter sets it (sdk-go's
/// `WithTimeNow`): the wall clock in UTC, RFC 3339 with nanoseconds and `Z`, always 30
/// characters (`world::TIME_PLACE`'s length). One per sender (connection or thread): each value
/// is later than the one before, by 1 ns if the wall clock stood still or stepped back; the date
/// and second are formatted again only when the second changes.
pub(crate) struct Clock {
    /// The last value, since the Unix epoch.
    last: Duration,
    /// The second `text` holds the date and time of, if any.
    second: Option<u64>,
    /// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
    text: String,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock {
            last: Duration::ZERO,
            second: None,
            text: String::with_capacity(32),
        }
    }

    /// The current time, e.g. `2026-11-29T10:00:00.123456789Z`.
    pub(crate) fn now(&mut self) -> &str {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.last = wall.max(self.last + Duration::from_nanos(1));
        let (second, nanos) = (self.last.as_secs(), self.last.subsec_nanos());
        if self.second != Some(second) {
            let at = i64::try_from(second)
                .ok()
                .and_then(|second| chrono::DateTime::from_timestamp(second, 0))
                .unwrap_or_default();
            self.text.clear();
            let _ = write!(self.text, "{}", at.format("%Y-%m-%dT%H:%M:%S."));
            self.second = Some(second);
        }
        self.text.truncate(20);
        let _ = write!(self.text, "{nanos:09}Z");
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::{self, Fixtures, Mode};

    /// The time `text` says, checked to be RFC 3339 in UTC with nanoseconds, 30 characters.
    fn parse(text: &str) -> chrono::DateTime<chrono::Utc> {
        assert_eq!(text.len(), world::TIME_PLACE.len(), "{text}");
        assert!(text.ends_with('Z') && text.as_bytes()[19] == b'.', "{text}");
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap_or_else(|error| panic!("{text}: {error}"))
            .with_timezone(&chrono::Utc)
    }

    #[test]
    fn the_clock_gives_now_in_rfc_3339_utc_with_nanoseconds_and_never_goes_back() {
        let mut clock = Clock::new();
        let mut last = parse(clock.now());
        assert!((chrono::Utc::now() - last).num_milliseconds().abs() < 1000);
        for _ in 0..100_000 {
            let next = parse(clock.now());
            assert!(next > last, "{last} then {next}");
            last = next;
        }
        std::thread::sleep(Duration::from_millis(1100));
        let later = parse(clock.now());
        assert!(
            (later - last).num_milliseconds() >= 1100,
            "{last} then {later}"
        );
        assert!((chrono::Utc::now() - later).num_milliseconds().abs() < 1000);
    }

    #[test]
    fn a_filled_request_carries_the_time_it_was_filled_at() {
        let fixtures = Fixtures::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|error| panic!("fixtures: {error}"));
        let (mut clock, mut rng, mut buf) = (Clock::new(), Rng::seeded(3), Vec::new());
        for mode in [Mode::Binary, Mode::Structured] {
            for object in world::app(&fixtures, 1).iter().take(3) {
                let template =
                    world::request(mode, "update", object, world::ID_PLACE, world::RV_PLACE);
                let time = clock.now().to_string();
                world::fill_at(&template, &rng.id(), "000000000000007", &time, &mut buf);
                let text = String::from_utf8_lossy(&buf);
                let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
                let length: Option<usize> = head
                    .lines()
                    .find_map(|line| line.strip_prefix("Content-Length: "))
                    .and_then(|value| value.parse().ok());
                assert_eq!(length, Some(body.len()), "{mode:?}");
                let sent = match mode {
                    Mode::Binary => head
                        .lines()
                        .find_map(|line| line.strip_prefix("ce-time: "))
                        .unwrap_or_default()
                        .to_string(),
                    Mode::Structured => {
                        let value: serde_json::Value =
                            serde_json::from_str(body).unwrap_or_default();
                        value["time"].as_str().unwrap_or_default().to_string()
                    }
                };
                assert_eq!(sent, time);
                let age = chrono::Utc::now() - parse(&sent);
                assert!((0..1000).contains(&age.num_milliseconds()), "{sent}");
                eprintln!(
                    "{mode:?}: time {sent}, Content-Length {length:?}, body {} bytes\n{}",
                    body.len(),
                    head.lines()
                        .filter(|line| line.starts_with("ce-") || line.starts_with("Content"))
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                if mode == Mode::Structured {
                    eprintln!("{}...", &body[..body.len().min(330)]);
                }
            }
        }
    }
}
