//! A WebSocket client written from RFC 6455 itself, for the conformance cases: its own opening
//! handshake (section 4.1), its own frames (section 5.2: any FIN, RSV bits, opcode and length
//! encoding, masked or not, even ones no conforming client would send) and its own reading of
//! the server's frames, each checked against what the RFC asks of a server (unmasked, RSV bits
//! clear, a known opcode, control frames final and at most 125 bytes, a close payload that is
//! empty or a valid code and UTF-8 reason). Nothing here is tungstenite's: a test of the
//! gateway's WebSocket layer must not share that layer's reading of the RFC.

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use sha1::{Digest as _, Sha1};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The GUID of RFC 6455, section 1.3, that the accept key is derived with.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

pub const CONTINUATION: u8 = 0x0;
pub const TEXT: u8 = 0x1;
pub const BINARY: u8 = 0x2;
pub const CLOSE: u8 = 0x8;
pub const PING: u8 = 0x9;
pub const PONG: u8 = 0xA;

/// A frame as the client sends it: every header field is the case's to choose.
#[derive(Clone, Debug)]
pub struct Frame {
    pub fin: bool,
    /// RSV1, RSV2, RSV3 as the three low bits (RSV1 highest).
    pub rsv: u8,
    pub opcode: u8,
    pub payload: Vec<u8>,
    /// Clients MUST mask (section 5.3); a case may not.
    pub masked: bool,
}

impl Frame {
    /// A final, masked frame.
    pub fn new(opcode: u8, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            fin: true,
            rsv: 0,
            opcode,
            payload: payload.into(),
            masked: true,
        }
    }

    pub fn text(payload: impl Into<Vec<u8>>) -> Self {
        Self::new(TEXT, payload)
    }

    /// A Close frame with `code` and `reason` (section 5.5.1: the code first, in network order).
    pub fn close(code: u16, reason: &[u8]) -> Self {
        let mut payload = code.to_be_bytes().to_vec();
        payload.extend_from_slice(reason);
        Self::new(CLOSE, payload)
    }

    pub fn fin(mut self, fin: bool) -> Self {
        self.fin = fin;
        self
    }

    pub fn rsv(mut self, rsv: u8) -> Self {
        self.rsv = rsv;
        self
    }

    pub fn unmasked(mut self) -> Self {
        self.masked = false;
        self
    }

    /// The frame's bytes (section 5.2), with the shortest length encoding and a fresh mask.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = header(
            self.fin,
            self.rsv,
            self.opcode,
            self.masked,
            self.payload.len(),
        );
        if self.masked {
            let key: [u8; 4] = rand::random();
            bytes.extend_from_slice(&key);
            bytes.extend(self.payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        } else {
            bytes.extend_from_slice(&self.payload);
        }
        bytes
    }
}

/// A frame's header up to the masking key: the payload length in 7 bits, or 126 and 16 bits, or
/// 127 and 64 bits (section 5.2, the shortest that holds it).
pub fn header(fin: bool, rsv: u8, opcode: u8, masked: bool, len: usize) -> Vec<u8> {
    let mut bytes = vec![(u8::from(fin) << 7) | ((rsv & 0b111) << 4) | (opcode & 0x0F)];
    let mask = if masked { 0x80 } else { 0 };
    match len {
        n if n < 126 => bytes.push(mask | n as u8),
        n if n <= usize::from(u16::MAX) => {
            bytes.push(mask | 126);
            bytes.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            bytes.push(mask | 127);
            bytes.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    bytes
}

/// A frame the server sent, already checked against what the RFC allows a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heard {
    Text(Vec<u8>),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    /// A Close, with its code and reason if it had a payload.
    Close(Option<(u16, String)>),
}

/// What reading from the server gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    Frame(Heard),
    /// The server closed the TCP connection.
    Eof,
    /// Nothing complete arrived in time.
    Timeout,
    /// The server broke the RFC (what it did, in words).
    Violation(String),
}

/// One connection, past its opening handshake.
pub struct Conn {
    stream: TcpStream,
    buffer: Vec<u8>,
    /// A text message the server began in fragments and has not finished.
    partial: Option<Vec<u8>>,
}

/// The server's answer to an opening handshake.
pub struct Answer {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The connection, with whatever arrived after the headers.
    pub conn: Conn,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The answer's body, `Content-Length` bytes of it.
    pub async fn body(&mut self) -> Vec<u8> {
        let len: usize = self
            .header("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let conn = &mut self.conn;
        while conn.buffer.len() < len {
            let mut chunk = [0u8; 4096];
            match tokio::time::timeout(WITHIN, conn.stream.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => conn.buffer.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
        conn.buffer.drain(..len.min(conn.buffer.len())).collect()
    }
}

/// A fresh `Sec-WebSocket-Key` (section 4.1: 16 random bytes, base64) and the accept key the
/// server must answer it with.
pub fn key_pair() -> (String, String) {
    let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 16]>());
    (key.clone(), accept_key(&key))
}

/// Section 4.2.2: base64 of the SHA-1 of the key and the GUID.
pub fn accept_key(key: &str) -> String {
    let digest = Sha1::digest(format!("{key}{GUID}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// Sends `request` (the whole handshake, head and blank line) and reads the answer's head.
pub async fn handshake(addr: SocketAddr, request: &str) -> Answer {
    let mut stream = TcpStream::connect(addr).await.expect("the gateway accepts");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut buffer = Vec::new();
    let end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(WITHIN, stream.read(&mut chunk))
            .await
            .expect("an answer in time")
            .expect("read");
        assert!(n > 0, "the connection ended before an answer");
        buffer.extend_from_slice(&chunk[..n]);
        assert!(buffer.len() < 64 * 1024, "an answer's head too long");
    };
    let head = String::from_utf8(buffer[..end].to_vec()).expect("an ASCII head");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = buffer[end + 4..].to_vec();
    Answer {
        status,
        headers,
        conn: Conn {
            stream,
            buffer: rest,
            partial: None,
        },
    }
}

/// The usual handshake for `path` on `addr`, with `extra` header lines (each ending in CRLF).
pub fn request(addr: SocketAddr, path: &str, key: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

/// How long any one wait of a case lasts: far longer than a working gateway needs.
pub const WITHIN: Duration = Duration::from_secs(10);

impl Conn {
    pub async fn send(&mut self, frame: &Frame) {
        self.send_raw(&frame.encode()).await;
    }

    /// Writes bytes as they are. A server that already closed may refuse them: that is for the
    /// reads after to tell.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes).await;
    }

    /// The next frame of the server's (fragments of a text message put together), within `wait`.
    pub async fn read(&mut self, wait: Duration) -> Read {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match self.parse() {
                Ok(Some(Some(heard))) => return Read::Frame(heard),
                Ok(Some(None)) => continue,
                Ok(None) => {}
                Err(violation) => return Read::Violation(violation),
            }
            let mut chunk = [0u8; 8192];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
                Err(_) => return Read::Timeout,
                Ok(Ok(0)) => return Read::Eof,
                // A reset after the server's last bytes is still the server closing.
                Ok(Err(_)) => return Read::Eof,
                Ok(Ok(n)) => self.buffer.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// One frame off the buffer: `Ok(None)` if incomplete, `Ok(Some(None))` for a fragment that
    /// completes no message yet.
    fn parse(&mut self) -> Result<Option<Option<Heard>>, String> {
        let b = &self.buffer;
        if b.len() < 2 {
            return Ok(None);
        }
        let (fin, rsv, opcode) = (b[0] & 0x80 != 0, (b[0] >> 4) & 0b111, b[0] & 0x0F);
        if b[1] & 0x80 != 0 {
            return Err("a server frame is masked (section 5.1 forbids it)".into());
        }
        let (len, at) = match b[1] & 0x7F {
            126 if b.len() >= 4 => (usize::from(u16::from_be_bytes([b[2], b[3]])), 4),
            127 if b.len() >= 10 => {
                let len = u64::from_be_bytes(b[2..10].try_into().expect("8 bytes"));
                (usize::try_from(len).map_err(|_| "a 64-bit length")?, 10)
            }
            126 | 127 => return Ok(None),
            n => (usize::from(n), 2),
        };
        if b.len() < at + len {
            return Ok(None);
        }
        if rsv != 0 {
            return Err(format!(
                "RSV bits {rsv:03b} on a server frame, with no extension"
            ));
        }
        let payload = b[at..at + len].to_vec();
        self.buffer.drain(..at + len);
        if opcode >= 0x8 && (!fin || len > 125) {
            return Err(format!(
                "a control frame {opcode:#x} not final or over 125 bytes ({len})"
            ));
        }
        let heard = match (opcode, self.partial.as_mut()) {
            (TEXT, None) if fin => Heard::Text(payload),
            (TEXT, None) => {
                self.partial = Some(payload);
                return Ok(Some(None));
            }
            (CONTINUATION, Some(partial)) => {
                partial.extend_from_slice(&payload);
                if !fin {
                    return Ok(Some(None));
                }
                Heard::Text(self.partial.take().expect("a partial message"))
            }
            (BINARY, None) if fin => Heard::Binary(payload),
            (PING, _) => Heard::Ping(payload),
            (PONG, _) => Heard::Pong(payload),
            (CLOSE, _) => Heard::Close(close_payload(&payload)?),
            (op, partial) => {
                return Err(format!(
                    "opcode {op:#x} from the server (a message in fragments: {})",
                    partial.is_some()
                ))
            }
        };
        if let Heard::Text(text) = &heard {
            std::str::from_utf8(text).map_err(|_| "a text message that is not UTF-8")?;
        }
        Ok(Some(Some(heard)))
    }
}

/// A Close frame's payload as section 5.5.1 and 7.4 allow it: empty, or a code a server may send
/// and a UTF-8 reason.
fn close_payload(payload: &[u8]) -> Result<Option<(u16, String)>, String> {
    match payload {
        [] => Ok(None),
        [_] => Err("a one-byte close payload".into()),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            if !valid_close_code(code) {
                return Err(format!("close code {code}, which no endpoint may send"));
            }
            let reason = String::from_utf8(reason.to_vec())
                .map_err(|_| format!("close {code} with a reason that is not UTF-8"))?;
            Ok(Some((code, reason)))
        }
    }
}

/// Whether an endpoint may put `code` in a Close frame (section 7.4: 1004, 1005, 1006 and 1015
/// are never sent, 1016-2999 are reserved, below 1000 and from 5000 unused; 1012-1014 were
/// registered with IANA since).
pub fn valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}
