//! What a waiting client is shown, and the room's messages serialised once per tick: every
//! session shown the same thing in the same tick sends the same bytes (the freshness grid makes
//! that common: everyone shown 48,600 with the same ETA), so a message is built once and shared.

use std::collections::HashMap;
use std::sync::Mutex;

use floodgate_protocol::ws::ServerMessage;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// A message shown while waiting: the pre-queue's size before the draw, a position after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shown {
    PreQueue {
        size: u64,
        opens_at_ms: i64,
    },
    Position {
        position: u64,
        eta_secs: Option<u64>,
    },
}

impl Shown {
    pub fn message(self) -> ServerMessage {
        match self {
            Shown::PreQueue { size, opens_at_ms } => ServerMessage::PreQueue { size, opens_at_ms },
            Shown::Position { position, eta_secs } => {
                ServerMessage::Position { position, eta_secs }
            }
        }
    }

    /// The message's type, as the sent-messages counter labels it.
    pub fn kind(self) -> &'static str {
        self.message().kind()
    }
}

/// The tick's messages, by what they show. Emptied every tick, so it holds at most what one
/// tick's sessions were shown (a few thousand distinct values for millions of clients).
#[derive(Default)]
pub struct Frames {
    made: Mutex<HashMap<Shown, Utf8Bytes>>,
}

impl Frames {
    /// The message for `shown`, serialised by the first session that needs it this tick.
    pub fn get(&self, shown: Shown) -> Utf8Bytes {
        let mut made = self.made.lock().expect("lock");
        made.entry(shown)
            .or_insert_with(|| {
                let text = serde_json::to_string(&shown.message()).expect("messages serialise");
                Utf8Bytes::from(text)
            })
            .clone()
    }

    /// A new tick: the next messages are made afresh (the ETA in them moves with time).
    pub fn clear(&self) {
        self.made.lock().expect("lock").clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_message_per_value_per_tick() {
        let frames = Frames::default();
        let at = |position| Shown::Position {
            position,
            eta_secs: Some(9),
        };
        let first = frames.get(at(48_600));
        let again = frames.get(at(48_600));
        assert_eq!(
            first.as_str(),
            r#"{"type":"position","position":48600,"eta_secs":9}"#
        );
        assert_eq!(
            first.as_str().as_ptr(),
            again.as_str().as_ptr(),
            "the same bytes, shared"
        );
        assert_ne!(frames.get(at(48_800)), first);
        frames.clear();
        let next_tick = frames.get(at(48_600));
        assert_eq!(next_tick, first);
        assert_ne!(
            next_tick.as_str().as_ptr(),
            first.as_str().as_ptr(),
            "made again"
        );
    }
}
