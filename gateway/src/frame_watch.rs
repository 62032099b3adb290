//! What kind of frame broke the size limit, and whether a client sent more frames than a session
//! may. The WebSocket layer (tungstenite) refuses a frame
//! longer than the waiting room's limit as soon as its header is read, as "message too big",
//! before it looks at the frame's kind; RFC 6455 5.5 says a control frame (a ping, a pong, a
//! close) over 125 bytes is a protocol error whatever its length, which the session closes with
//! 1002, not 1009. So the bytes a client sends pass through [`FrameWatch`] on their way in,
//! which follows the frames' headers (a few bytes of state, no copy) and remembers whether a
//! control frame said it was longer than 125 bytes. A frame that short is the layer's own to
//! refuse; the watch only tells the session which code a refusal of the layer's deserves.
//!
//! Every frame costs the gateway a parse, and the layer reads on through the fragments of a
//! message before the session sees anything: a client sending millions of empty fragments would
//! take a core with nothing to show for it. So each connection has a budget of frames,
//! [`FRAMES_AT_ONCE`] then [`FRAMES_PER_SEC`] (a person's client sends a pong every 15 s and a
//! message now and then). A frame that asks for an answer (a ping, or a message: the only one
//! the protocol takes is its ping) costs a write besides, a system call each, so those have a
//! far smaller budget of their own, [`ASKS_AT_ONCE`] then [`ASKS_PER_SEC`]: a new socket is
//! cheap to a stranger (a join a fifth of a second on a sale with no puzzle), and with the frame
//! budget alone each bought two thousand answers, milliseconds of a gateway's core. Past either,
//! the read fails, and the session closes with 1008 (policy violation).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest payload a control frame may have (RFC 6455 5.5).
const CONTROL_MAX: u64 = 125;

/// Frames a connection may send at once (the RFC's tests send a thousand empty fragments of one
/// message, within it).
pub const FRAMES_AT_ONCE: u32 = 2_048;
/// Then this many a second.
pub const FRAMES_PER_SEC: u32 = 16;
/// Frames that ask for an answer (pings, messages) a connection may send at once: RFC 6455's
/// tests send ten pings in a row, a person's page a ping now and then.
pub const ASKS_AT_ONCE: u32 = 32;
/// Then this many a second.
pub const ASKS_PER_SEC: u32 = 2;

/// A budget that comes back with time: `at_once`, then `per_sec`.
struct Budget {
    left: u32,
    refilled: Instant,
    at_once: u32,
    per_sec: u32,
}

impl Budget {
    fn new(at_once: u32, per_sec: u32) -> Self {
        Self {
            left: at_once,
            refilled: Instant::now(),
            at_once,
            per_sec,
        }
    }

    /// Takes one, refilling the budget by the time since it was last full or refilled (the
    /// clock is read when a full budget is first spent and when it runs out: most connections
    /// read it a few times); `false` when none is left. Counted from the last refill alone, a
    /// budget full after a quiet spell and then spent would earn that spell's worth at once,
    /// twice the burst back to back.
    fn take(&mut self) -> bool {
        if self.left == self.at_once {
            self.refilled = Instant::now();
        } else if self.left == 0 {
            let now = Instant::now();
            let ms = now.saturating_duration_since(self.refilled).as_millis();
            let earned = ms * u128::from(self.per_sec) / 1_000;
            if earned > 0 {
                self.left = u32::try_from(earned).unwrap_or(u32::MAX).min(self.at_once);
                self.refilled = now;
            }
        }
        match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }
}

/// A connection's incoming bytes, read through, with the headers of its frames followed.
pub struct FrameWatch<T> {
    inner: T,
    /// The header being read: up to 14 bytes (2, then 2 or 8 of extended length, then a 4-byte
    /// mask).
    header: [u8; 14],
    /// How many of `header`'s bytes have come.
    have: u8,
    /// Payload bytes still to pass before the next header.
    payload_left: u64,
    /// A control frame announced more than 125 bytes.
    control_too_long: bool,
    /// Frames the connection may still send, and of them those that ask for an answer.
    frames: Budget,
    asks: Budget,
    /// The connection sent more frames than its budget.
    flooded: bool,
}

impl<T> FrameWatch<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            header: [0; 14],
            have: 0,
            payload_left: 0,
            control_too_long: false,
            frames: Budget::new(FRAMES_AT_ONCE, FRAMES_PER_SEC),
            asks: Budget::new(ASKS_AT_ONCE, ASKS_PER_SEC),
            flooded: false,
        }
    }

    /// Whether the connection sent more frames than its budget (the read failed for it).
    pub fn flooded(&self) -> bool {
        self.flooded
    }

    /// Takes one frame from the budgets: every frame from the first, one that asks for an
    /// answer from the second as well.
    fn take_frame(&mut self, asks: bool) {
        if !self.frames.take() || (asks && !self.asks.take()) {
            self.flooded = true;
        }
    }

    /// Whether a control frame announced more than 125 bytes: the client broke RFC 6455.
    pub fn control_too_long(&self) -> bool {
        self.control_too_long
    }

    /// Follows `bytes`, the next the client sent.
    fn follow(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.control_too_long && !self.flooded {
            if self.payload_left > 0 {
                let skipped = usize::try_from(self.payload_left)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                self.payload_left -= skipped as u64;
                bytes = &bytes[skipped..];
                continue;
            }
            self.header[usize::from(self.have)] = bytes[0];
            self.have += 1;
            bytes = &bytes[1..];
            if let Some((length, opcode)) = self.header_done() {
                self.have = 0;
                self.payload_left = length;
                // Opcodes 0x8 to 0xF are control frames.
                self.control_too_long = opcode & 0x08 != 0 && length > CONTROL_MAX;
                // A ping, or the first frame of a text or binary message (a continuation adds
                // to one; a pong or a close is answered once at most).
                self.take_frame(matches!(opcode, 0x1 | 0x2 | 0x9));
            }
        }
    }

    /// The payload length and the opcode, once the whole header is here.
    fn header_done(&self) -> Option<(u64, u8)> {
        if self.have < 2 {
            return None;
        }
        let [first, second] = [self.header[0], self.header[1]];
        let (extended, short) = match second & 0x7f {
            126 => (2, None),
            127 => (8, None),
            n => (0, Some(u64::from(n))),
        };
        let mask = if second & 0x80 != 0 { 4 } else { 0 };
        if self.have < 2 + extended + mask {
            return None;
        }
        let length = short.unwrap_or_else(|| {
            let mut be = [0u8; 8];
            let at = 8 - usize::from(extended);
            be[at..].copy_from_slice(&self.header[2..2 + usize::from(extended)]);
            u64::from_be_bytes(be)
        });
        Some((length, first & 0x0f))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FrameWatch<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = read {
            let this = &mut *self;
            this.follow(&buf.filled()[before..]);
            if this.flooded {
                // The layer reads no further: the session sees the failure and closes 1008.
                return Poll::Ready(Err(io::Error::other("more frames than a session may send")));
            }
        }
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FrameWatch<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, bytes)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's frame header: masked, with `length` in the shortest form.
    fn header(opcode: u8, length: u64) -> Vec<u8> {
        let mut bytes = vec![0x80 | opcode];
        match length {
            n if n < 126 => bytes.push(0x80 | n as u8),
            n if n <= u64::from(u16::MAX) => {
                bytes.push(0x80 | 126);
                bytes.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                bytes.push(0x80 | 127);
                bytes.extend_from_slice(&n.to_be_bytes());
            }
        }
        bytes.extend_from_slice(&[1, 2, 3, 4]);
        bytes
    }

    #[test]
    fn a_connection_may_send_its_budget_of_frames_and_no_more() {
        let pong = header(0xA, 0);
        let mut watch = FrameWatch::new(());
        let budget: Vec<u8> = pong.repeat(FRAMES_AT_ONCE as usize);
        // In pieces that split headers: the frames are counted, not the reads.
        for piece in budget.chunks(7) {
            watch.follow(piece);
        }
        assert!(!watch.flooded(), "the whole budget");
        watch.follow(&pong);
        assert!(watch.flooded(), "one past it");
        // A fragment's payload is not a frame, however many bytes it has.
        let mut long = FrameWatch::new(());
        long.follow(&[header(0x1, 100_000), vec![0; 100_000]].concat());
        assert_eq!(long.frames.left, FRAMES_AT_ONCE - 1);
    }

    #[test]
    fn frames_that_ask_for_an_answer_have_a_smaller_budget() {
        // Pings, or messages begun: the budget of them, and then one more is a flood.
        for asking in [header(0x9, 0), [header(0x1, 15), vec![b' '; 15]].concat()] {
            let mut watch = FrameWatch::new(());
            watch.follow(&asking.repeat(ASKS_AT_ONCE as usize));
            assert!(!watch.flooded(), "the whole budget");
            watch.follow(&asking);
            assert!(watch.flooded(), "one past it");
        }
        // A message's continuations, pongs and a close answer nothing: the frames' budget only.
        let mut watch = FrameWatch::new(());
        let quiet = [
            header(0x1, 0),
            header(0x0, 0).repeat(100),
            header(0xA, 0).repeat(100),
        ];
        watch.follow(&quiet.concat());
        watch.follow(&header(0x8, 0));
        assert!(!watch.flooded());
        assert_eq!(watch.asks.left, ASKS_AT_ONCE - 1);
    }

    #[test]
    fn a_quiet_spell_earns_no_more_than_the_burst() {
        // Sixty seconds quiet with a full budget: the burst, and one more is a flood.
        let mut watch = FrameWatch::new(());
        watch.asks.refilled = Instant::now() - std::time::Duration::from_secs(60);
        let ping = header(0x9, 0);
        watch.follow(&ping.repeat(ASKS_AT_ONCE as usize));
        assert!(!watch.flooded(), "the burst");
        watch.follow(&ping);
        assert!(
            watch.flooded(),
            "one past it, however long the quiet before"
        );
    }

    #[test]
    fn the_budget_comes_back_with_time() {
        let mut watch = FrameWatch::new(());
        let two_seconds_ago = Instant::now() - std::time::Duration::from_secs(2);
        (watch.frames.left, watch.frames.refilled) = (0, two_seconds_ago);
        (watch.asks.left, watch.asks.refilled) = (0, two_seconds_ago);
        watch.follow(&header(0x9, 0));
        assert!(!watch.flooded());
        // Two seconds' worth, less the frame just sent.
        assert_eq!(watch.frames.left, 2 * FRAMES_PER_SEC - 1);
        assert_eq!(watch.asks.left, 2 * ASKS_PER_SEC - 1);
    }

    fn watched(chunks: &[&[u8]]) -> bool {
        let mut watch = FrameWatch::new(());
        for chunk in chunks {
            watch.follow(chunk);
        }
        watch.control_too_long()
    }

    #[test]
    fn a_control_frame_is_told_by_its_header_alone_in_any_pieces() {
        let text = [header(0x1, 300), vec![b'x'; 300]].concat();
        let ping = [header(0x9, 125), vec![b'x'; 125]].concat();
        assert!(
            !watched(&[&text, &ping]),
            "data of any length, a 125-byte ping"
        );
        // A long ping after a long text: the text's payload is skipped, never read as headers.
        let long_ping = header(0x9, 2_000);
        assert!(watched(&[&text, &long_ping]));
        assert!(watched(&[&header(0x8, 126)]), "a close of 126 bytes");
        assert!(
            watched(&[&header(0xA, 1 << 62)]),
            "a pong of a 64-bit length"
        );
        // Every split of the stream tells the same.
        let stream = [text.clone(), ping.clone(), long_ping.clone()].concat();
        for at in 0..stream.len() {
            let (a, b) = stream.split_at(at);
            assert!(watched(&[a, b]), "split at {at}");
            assert!(!watched(&[&stream[..at]]) || at > text.len() + ping.len());
        }
        // A text frame whose payload looks like a long ping's header is still a text frame.
        let disguised = [header(0x1, 8), header(0x9, 2_000)].concat();
        assert_eq!(header(0x9, 2_000).len(), 8);
        assert!(!watched(&[&disguised]));
    }
}
