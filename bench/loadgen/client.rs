//! A minimal blocking HTTP/1.1 client over loopback: one keep-alive connection, one request at a
//! time, `Content-Length` bodies only (what drift-sentinel and the ceiling answer). Cheap enough
//! that the load generator costs little of the two cores it shares with the server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

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
