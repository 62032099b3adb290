//! The conformance cases, in the sections of the Autobahn suite (1 framing, 2 pings and pongs,
//! 3 reserved bits, 4 opcodes, 5 fragmentation, 6 UTF-8, 7 the closing handshake, 9 limits),
//! each read from RFC 6455 and adapted to the waiting room: the gateway is no echo server, so a
//! data message that must be taken is the protocol's own `{"type":"ping"}`, answered with
//! `{"type":"pong"}`; a valid message the protocol does not take is closed with its documented
//! 4400, which a case tells apart from the RFC's 1002 and 1007.

use floodgate_gateway::frame_watch::{ASKS_AT_ONCE, FRAMES_AT_ONCE};
use floodgate_protocol::ws::{close, MAX_CLIENT_MESSAGE};

use super::wire::{header, Frame, BINARY, CLOSE, CONTINUATION, PING, PONG, TEXT};

/// One case: what the client sends, in order, and what it must hear, in order.
pub struct Case {
    pub id: String,
    pub send: Vec<Step>,
    pub expect: Vec<Expect>,
}

pub enum Step {
    Frame(Frame),
    /// Bytes as they are (a frame cut short, a length that lies).
    Raw(Vec<u8>),
    /// Bytes written one at a time, each on its own.
    Trickle(Vec<u8>),
}

/// What the server must do, in order; frames a case does not ask about (its heartbeats, the
/// pre-queue's size) are passed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The protocol's pong to a text ping, the session still open.
    AppPong,
    /// A Pong frame with exactly this payload (section 5.5.3).
    Pong(Vec<u8>),
    /// The server fails the connection with this code (section 7.1.7): its Close comes first;
    /// the client answers it, and the server closes TCP within the bound.
    Failed(u16),
    /// The client's Close is answered (section 5.5.1) with this code (`None`: no payload), then
    /// TCP is closed within the bound; nothing else is answered after the client's Close.
    Answered(Option<u16>),
}

/// The protocol's ping padded with JSON whitespace to exactly `len` bytes.
pub fn ping_of(len: usize) -> Vec<u8> {
    let ping = br#"{"type":"ping"}"#;
    assert!(len >= ping.len());
    let mut bytes = ping.to_vec();
    bytes.resize(len, b' ');
    bytes
}

fn ping() -> Vec<u8> {
    ping_of(15)
}

fn case(id: impl Into<String>, send: Vec<Step>, expect: Vec<Expect>) -> Case {
    Case {
        id: id.into(),
        send,
        expect,
    }
}

fn frames(frames: Vec<Frame>) -> Vec<Step> {
    frames.into_iter().map(Step::Frame).collect()
}

fn fragment(opcode: u8, payload: &[u8], fin: bool) -> Frame {
    Frame::new(opcode, payload.to_vec()).fin(fin)
}

const PROTOCOL: u16 = close::PROTOCOL_ERROR;

/// Section 1: data frames of every length encoding, within the limit and past it.
pub fn framing() -> Vec<Case> {
    use Expect::{AppPong, Failed};
    let mut cases = Vec::new();
    for len in [15, 125, 126, 127, 1_000, MAX_CLIENT_MESSAGE] {
        cases.push(case(
            format!("1.1 a text message of {len} bytes"),
            frames(vec![Frame::text(ping_of(len))]),
            vec![AppPong],
        ));
    }
    let two = [Frame::text(ping()).encode(), Frame::text(ping()).encode()].concat();
    cases.push(case(
        "1.2 two messages in one write",
        vec![Step::Raw(two)],
        vec![AppPong, AppPong],
    ));
    cases.push(case(
        "1.3 a message written a byte at a time",
        vec![Step::Trickle(Frame::text(ping()).encode())],
        vec![AppPong],
    ));
    cases.push(case(
        "1.4 an empty text message is not the protocol's",
        frames(vec![Frame::text(Vec::new())]),
        vec![Failed(close::BAD_MESSAGE)],
    ));
    for len in [0, 125, 126, 65_536] {
        cases.push(case(
            format!("1.5 a binary message of {len} bytes is not the protocol's"),
            frames(vec![Frame::new(BINARY, vec![0xFE; len])]),
            vec![Failed(if len > MAX_CLIENT_MESSAGE {
                close::MESSAGE_TOO_BIG
            } else {
                close::BAD_MESSAGE
            })],
        ));
    }
    cases.push(case(
        "1.6 a frame the client did not mask (section 5.1)",
        frames(vec![Frame::text(ping()).unmasked()]),
        vec![Failed(PROTOCOL)],
    ));
    cases
}

/// Section 2: pings are answered with their payload, pongs nobody asked for are taken quietly,
/// and a control frame over 125 bytes is a protocol error (section 5.5).
pub fn pings() -> Vec<Case> {
    use Expect::{AppPong, Failed, Pong};
    let binary: Vec<u8> = (0..=255u8).step_by(3).collect();
    let mut cases = vec![
        case(
            "2.1 a ping with no payload",
            frames(vec![Frame::new(PING, vec![])]),
            vec![Pong(vec![])],
        ),
        case(
            "2.2 a ping with a text payload",
            frames(vec![Frame::new(PING, b"Hello, world!".to_vec())]),
            vec![Pong(b"Hello, world!".to_vec())],
        ),
        case(
            "2.3 a ping with a binary payload",
            frames(vec![Frame::new(PING, binary.clone())]),
            vec![Pong(binary)],
        ),
        case(
            "2.4 a ping of 125 bytes",
            frames(vec![Frame::new(PING, vec![b'*'; 125])]),
            vec![Pong(vec![b'*'; 125])],
        ),
        case(
            "2.5 a ping of 126 bytes",
            frames(vec![Frame::new(PING, vec![b'*'; 126])]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "2.6 a ping written a byte at a time",
            vec![Step::Trickle(Frame::new(PING, b"slowly".to_vec()).encode())],
            vec![Pong(b"slowly".to_vec())],
        ),
        case(
            "2.7 a pong nobody asked for",
            frames(vec![Frame::new(PONG, vec![]), Frame::text(ping())]),
            vec![AppPong],
        ),
        case(
            "2.8 a pong nobody asked for, with a payload",
            frames(vec![
                Frame::new(PONG, b"unsolicited".to_vec()),
                Frame::text(ping()),
            ]),
            vec![AppPong],
        ),
        case(
            "2.9 a pong of 126 bytes",
            frames(vec![Frame::new(PONG, vec![b'*'; 126])]),
            vec![Failed(PROTOCOL)],
        ),
        // Past the size limit too, a control frame over 125 bytes is a protocol error (5.5),
        // not a message too big: the frame's kind decides, as soon as its header is read.
        case(
            "2.10 a ping of 2,000 bytes",
            frames(vec![Frame::new(PING, vec![b'*'; 2_000])]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "2.11 a pong that says it is 2^62 bytes, and sends none",
            vec![Step::Raw(
                [header(true, 0, PONG, true, 1 << 62), vec![1, 2, 3, 4]].concat(),
            )],
            vec![Failed(PROTOCOL)],
        ),
    ];
    // Section 5.5.3: an endpoint MAY answer only the most recent of several pings.
    let many = (0..10)
        .map(|i| Frame::new(PING, format!("ping {i}").into_bytes()))
        .collect();
    cases.push(case(
        "2.10 ten pings in a row",
        frames(many),
        vec![Pong(b"ping 9".to_vec())],
    ));
    cases.push(case(
        "2.11 a ping the client did not mask",
        frames(vec![Frame::new(PING, b"x".to_vec()).unmasked()]),
        vec![Failed(PROTOCOL)],
    ));
    cases
}

/// Sections 3 and 4: reserved bits with no extension negotiated, and reserved opcodes, fail
/// the connection (section 5.2).
pub fn reserved() -> Vec<Case> {
    use Expect::{AppPong, Failed};
    let mut cases = Vec::new();
    for rsv in 1..=7u8 {
        cases.push(case(
            format!("3.{rsv} RSV bits {rsv:03b} on a text frame"),
            frames(vec![Frame::text(ping()).rsv(rsv)]),
            vec![Failed(PROTOCOL)],
        ));
    }
    cases.push(case(
        "3.8 RSV bits on a ping",
        frames(vec![Frame::new(PING, b"x".to_vec()).rsv(0b010)]),
        vec![Failed(PROTOCOL)],
    ));
    cases.push(case(
        "3.9 RSV bits on a frame after a good message",
        frames(vec![Frame::text(ping()), Frame::text(ping()).rsv(0b001)]),
        vec![AppPong, Failed(PROTOCOL)],
    ));
    for opcode in (3..=7u8).chain(0xB..=0xF) {
        for payload in [Vec::new(), b"reserved".to_vec()] {
            cases.push(case(
                format!(
                    "4.{opcode:#x} reserved opcode with {} payload bytes",
                    payload.len()
                ),
                frames(vec![Frame::new(opcode, payload)]),
                vec![Failed(PROTOCOL)],
            ));
        }
    }
    cases.push(case(
        "4.16 a reserved opcode after a good message",
        frames(vec![Frame::text(ping()), Frame::new(5, b"x".to_vec())]),
        vec![AppPong, Failed(PROTOCOL)],
    ));
    cases
}

/// Section 5: a message in fragments is one message, control frames may come between its
/// fragments, and a fragment out of place fails the connection (section 5.4).
pub fn fragmentation() -> Vec<Case> {
    use Expect::{Answered, AppPong, Failed, Pong};
    let p = ping();
    let bytes: Vec<Frame> = p
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let opcode = if i == 0 { TEXT } else { CONTINUATION };
            fragment(opcode, &[*b], i + 1 == p.len())
        })
        .collect();
    vec![
        case(
            "5.1 a message in two fragments",
            frames(vec![
                fragment(TEXT, &p[..7], false),
                fragment(CONTINUATION, &p[7..], true),
            ]),
            vec![AppPong],
        ),
        case(
            "5.2 a message in one-byte fragments",
            frames(bytes),
            vec![AppPong],
        ),
        case(
            "5.3 empty fragments",
            frames(vec![
                fragment(TEXT, &[], false),
                fragment(CONTINUATION, &p, false),
                fragment(CONTINUATION, &[], true),
            ]),
            vec![AppPong],
        ),
        case(
            "5.4 a ping between fragments",
            frames(vec![
                fragment(TEXT, &p[..4], false),
                Frame::new(PING, b"between".to_vec()),
                fragment(CONTINUATION, &p[4..], true),
            ]),
            vec![Pong(b"between".to_vec()), AppPong],
        ),
        case(
            "5.5 a pong between fragments",
            frames(vec![
                fragment(TEXT, &p[..4], false),
                Frame::new(PONG, b"between".to_vec()),
                fragment(CONTINUATION, &p[4..], true),
            ]),
            vec![AppPong],
        ),
        case(
            "5.6 a close between fragments",
            frames(vec![
                fragment(TEXT, &p[..4], false),
                Frame::close(1000, b""),
            ]),
            vec![Answered(Some(1000))],
        ),
        case(
            "5.7 a ping in fragments",
            frames(vec![
                fragment(PING, b"frag", false),
                fragment(CONTINUATION, b"ment", true),
            ]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "5.8 a final continuation with nothing begun",
            frames(vec![fragment(CONTINUATION, &p, true)]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "5.9 a continuation with nothing begun, then the rest",
            frames(vec![
                fragment(CONTINUATION, &p[..4], false),
                fragment(CONTINUATION, &p[4..], true),
            ]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "5.10 a new text frame inside a message in fragments",
            frames(vec![
                fragment(TEXT, &p[..4], false),
                fragment(TEXT, &p, true),
            ]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "5.11 a binary frame inside a text message in fragments",
            frames(vec![
                fragment(TEXT, &p[..4], false),
                fragment(BINARY, b"x", true),
            ]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "5.12 a binary message in fragments is not the protocol's",
            frames(vec![
                fragment(BINARY, b"ab", false),
                fragment(CONTINUATION, b"cd", true),
            ]),
            vec![Failed(close::BAD_MESSAGE)],
        ),
        case(
            "5.13 a ping, then a message in fragments",
            frames(vec![
                Frame::new(PING, b"first".to_vec()),
                fragment(TEXT, &p[..9], false),
                fragment(CONTINUATION, &p[9..], true),
            ]),
            vec![Pong(b"first".to_vec()), AppPong],
        ),
    ]
}

/// Section 6 (RFC 6455 section 8.1, RFC 3629): a text message must be UTF-8 as a whole; the
/// server fails one that is not with 1007, wherever the bad bytes fall among its fragments.
pub fn utf8() -> Vec<Case> {
    use Expect::{AppPong, Failed};
    // Valid: κόσμε inside the ping (the protocol ignores a field it does not know).
    let valid = "{\"type\":\"ping\",\"note\":\"\u{3ba}\u{1f79}\u{3c3}\u{3bc}\u{3b5}\"}".as_bytes();
    let split_in_a_character = valid.iter().position(|b| *b >= 0x80).expect("non-ASCII") + 1;
    let mut cases = vec![
        case(
            "6.1 valid UTF-8 in one frame",
            frames(vec![Frame::text(valid.to_vec())]),
            vec![AppPong],
        ),
        case(
            "6.2 valid UTF-8 split inside a character across fragments",
            frames(vec![
                fragment(TEXT, &valid[..split_in_a_character], false),
                fragment(CONTINUATION, &valid[split_in_a_character..], true),
            ]),
            vec![AppPong],
        ),
    ];
    let invalid: [(&str, &[u8]); 8] = [
        ("an overlong NUL", b"\xc0\x80"),
        ("a lone continuation byte", b"\x80"),
        ("a surrogate", b"\xed\xa0\x80"),
        ("a code point past U+10FFFF", b"\xf4\x90\x80\x80"),
        ("0xFE", b"\xfe"),
        ("0xFF", b"\xff"),
        ("a sequence cut short at the end", b"\xce"),
        ("a five-byte sequence", b"\xf8\x88\x80\x80\x80"),
    ];
    for (n, (what, bad)) in invalid.into_iter().enumerate() {
        let mut message = br#"{"type":"ping","note":""#.to_vec();
        message.extend_from_slice(bad);
        if what != "a sequence cut short at the end" {
            message.extend_from_slice(br#""}"#);
        }
        cases.push(case(
            format!("6.{} {what} in one frame", n + 3),
            frames(vec![Frame::text(message.clone())]),
            vec![Failed(close::INVALID_DATA)],
        ));
        let at = message.len() - 2;
        cases.push(case(
            format!("6.{} {what}, in the first of two fragments", n + 3),
            frames(vec![
                fragment(TEXT, &message[..at], false),
                fragment(CONTINUATION, &message[at..], true),
            ]),
            vec![Failed(close::INVALID_DATA)],
        ));
    }
    cases
}

/// Section 7: the closing handshake (sections 5.5.1, 7.1, 7.4). Every Close is answered; a code
/// no endpoint may send, a one-byte payload or a control frame over 125 bytes is answered with
/// 1002, a reason that is not UTF-8 with 1007.
pub fn closing() -> Vec<Case> {
    use Expect::{Answered, Failed};
    let mut cases = vec![
        case(
            "7.1 a close with no payload",
            frames(vec![Frame::new(CLOSE, vec![])]),
            vec![Answered(None)],
        ),
        case(
            "7.2 a close, then a message",
            frames(vec![Frame::close(1000, b""), Frame::text(ping())]),
            vec![Answered(Some(1000))],
        ),
        case(
            "7.3 two closes",
            frames(vec![Frame::close(1000, b""), Frame::close(1000, b"")]),
            vec![Answered(Some(1000))],
        ),
        case(
            "7.4 a close with a one-byte payload",
            frames(vec![Frame::new(CLOSE, vec![0x03])]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "7.5 a close with a reason that is not UTF-8",
            frames(vec![Frame::close(
                1000,
                b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80",
            )]),
            vec![Failed(close::INVALID_DATA)],
        ),
        case(
            "7.6 a close with the longest reason (123 bytes)",
            frames(vec![Frame::close(1000, &[b'*'; 123])]),
            vec![Answered(Some(1000))],
        ),
        case(
            "7.7 a close of 126 bytes",
            frames(vec![Frame::close(1000, &[b'*'; 124])]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "7.7b a close of 2,000 bytes",
            frames(vec![Frame::close(1000, &[b'*'; 1_998])]),
            vec![Failed(PROTOCOL)],
        ),
        case(
            "7.8 a close the client did not mask",
            frames(vec![Frame::close(1000, b"").unmasked()]),
            vec![Failed(PROTOCOL)],
        ),
    ];
    for code in [
        1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
    ] {
        for reason in [&b""[..], b"Hello World!"] {
            cases.push(case(
                format!("7.9 close code {code}, {} reason bytes", reason.len()),
                frames(vec![Frame::close(code, reason)]),
                vec![Answered(Some(code))],
            ));
        }
    }
    for code in [
        0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
    ] {
        cases.push(case(
            format!("7.10 close code {code}, which no endpoint may send"),
            frames(vec![Frame::close(code, b"")]),
            vec![Answered(Some(PROTOCOL))],
        ));
    }
    cases
}

/// Section 9, as the waiting room limits it: a frame or message over
/// [`MAX_CLIENT_MESSAGE`] is closed with 1009 as soon as its length is known, before its
/// payload is read or kept.
pub fn limits() -> Vec<Case> {
    use Expect::Failed;
    let over = MAX_CLIENT_MESSAGE + 1;
    let half = ping_of(MAX_CLIENT_MESSAGE / 2 + 1);
    vec![
        case(
            format!("9.1 a text message of {over} bytes"),
            frames(vec![Frame::text(ping_of(over))]),
            vec![Failed(close::MESSAGE_TOO_BIG)],
        ),
        case(
            "9.2 a text message of 65,536 bytes (a 64-bit length)",
            frames(vec![Frame::text(ping_of(65_536))]),
            vec![Failed(close::MESSAGE_TOO_BIG)],
        ),
        case(
            "9.3 a frame that says it is 2^62 bytes, and sends none",
            vec![Step::Raw(
                [header(true, 0, TEXT, true, 1 << 62), vec![1, 2, 3, 4]].concat(),
            )],
            vec![Failed(close::MESSAGE_TOO_BIG)],
        ),
        case(
            "9.4 a message whose fragments add up past the limit",
            frames(vec![
                fragment(TEXT, &half, false),
                fragment(CONTINUATION, &half, true),
            ]),
            vec![Failed(close::MESSAGE_TOO_BIG)],
        ),
        case(
            "9.5 a thousand empty fragments, then more than the limit",
            frames(
                std::iter::once(fragment(TEXT, &[], false))
                    .chain((0..1_000).map(|_| fragment(CONTINUATION, &[], false)))
                    .chain(std::iter::once(fragment(
                        CONTINUATION,
                        &ping_of(over),
                        true,
                    )))
                    .collect(),
            ),
            vec![Failed(close::MESSAGE_TOO_BIG)],
        ),
        // Not the suite's: every frame costs the gateway a parse, and the layer reads on through
        // a message's fragments before the session sees anything, so a connection has a budget
        // of frames (docs/protocol.md 1.3). Before it, this flood was read to the end.
        case(
            "9.6 more frames than a session may send at once (pongs)",
            frames(
                (0..=FRAMES_AT_ONCE)
                    .map(|_| Frame::new(PONG, Vec::new()))
                    .collect(),
            ),
            vec![Failed(close::POLICY_VIOLATION)],
        ),
        case(
            "9.7 more frames than a session may send, as empty fragments of one message",
            frames(
                std::iter::once(fragment(TEXT, &[], false))
                    .chain((0..FRAMES_AT_ONCE).map(|_| fragment(CONTINUATION, &[], false)))
                    .collect(),
            ),
            vec![Failed(close::POLICY_VIOLATION)],
        ),
        // Not the suite's either: a ping or a message asks for an answer written back, a system
        // call, so those have a budget far smaller than the frames'. Before it, a new socket
        // (one a fifth of a second, on a sale with no puzzle) bought two thousand answers.
        case(
            "9.8 more pings than a session may send at once",
            frames(
                (0..=ASKS_AT_ONCE)
                    .map(|i| Frame::new(PING, i.to_string().into_bytes()))
                    .collect(),
            ),
            vec![Failed(close::POLICY_VIOLATION)],
        ),
        case(
            "9.9 more messages than a session may send at once (the protocol's ping)",
            frames((0..=ASKS_AT_ONCE).map(|_| Frame::text(ping())).collect()),
            vec![Failed(close::POLICY_VIOLATION)],
        ),
    ]
}
