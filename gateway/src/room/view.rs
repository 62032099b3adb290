//! What every session of a sale sees: the view the room refreshes once per tick, and how it is
//! made from the sale's state.

use floodgate_platform::keys::SaleKeys;
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::state::SaleMeta;
use floodgate_protocol::lottery::{draw_seed, Draw};
use floodgate_protocol::settings::Door;

/// What every session of a sale needs to know, refreshed once per tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoomView {
    /// False until the first read from Redis: sessions wait for a real view.
    pub loaded: bool,
    /// Highest place in line admitted so far.
    pub frontier: u64,
    /// Highest ticket handed out so far.
    pub issued: u64,
    pub opens_at_ms: i64,
    /// Admissions per second, as set.
    pub rate: f64,
    /// Live admissions per second over the last few seconds, once there were some.
    pub measured_rate: Option<f64>,
    pub token_ttl_ms: i64,
    pub max_seats: u32,
    /// An operator paused admission: nobody is let in, and no ETA can be given.
    pub paused: bool,
    /// Every pool is sold out and no hold can return: the room is closing.
    pub sold_out: bool,
    /// Whether the pre-queue has been drawn (then [`Room::place`] answers).
    pub drawn: bool,
    /// Dead places this gateway knows of: a new death changes positions, so it changes the view.
    pub dead_known: u64,
    /// SHA-256 (hex) of the lottery's secret seed.
    pub commitment: String,
    /// Settings the controller needs.
    pub active_cap: u64,
    pub stock_factor: f64,
    /// Admission tokens handed out and not yet spent or expired.
    pub unspent: u64,
    pub pools: Vec<String>,
    /// Who may come in and what they must show (joins read it from here, not from Redis).
    pub door: Door,
    /// Tickets handed out per second, sale-wide, over the last few seconds: what the proof of
    /// work rises with (`protocol::challenge::AutoDifficulty`).
    pub join_rate: f64,
    /// The lowest such rate over the last few seconds: what answers are checked against.
    pub join_rate_low: f64,
    /// The admission autopilot's settings as the meta holds them (`None`: off).
    pub autopilot: Option<String>,
}

impl RoomView {
    /// Whether `newer` holds news every session acts on at once: the first view, the draw, a
    /// pause or a resume (admission and its ETA stop or start), a new opening time, the end of
    /// the sale. Everything else reaches a session only if it changes what that session shows
    /// (the board wakes it) or with its next heartbeat (a fresh ETA): the freshness contract,
    /// `floodgate_protocol::freshness`.
    pub fn news_for_everyone(&self, newer: &RoomView) -> bool {
        self.loaded != newer.loaded
            || self.paused != newer.paused
            || self.sold_out != newer.sold_out
            || self.drawn != newer.drawn
            || self.opens_at_ms != newer.opens_at_ms
    }

    /// Seconds until `position` is admitted, at the measured rate once there is one (the set
    /// rate before that); unknown before the opening or while paused.
    pub fn eta_secs(&self, position: u64, now_ms: i64) -> Option<u64> {
        if now_ms < self.opens_at_ms || self.paused {
            return None;
        }
        let rate = self.measured_rate.unwrap_or(self.rate);
        if !(rate.is_finite() && rate > 0.0) {
            return None;
        }
        Some((position as f64 / rate).ceil() as u64)
    }
}

/// The view of a sale whose meta is `meta` (`None`: not armed, which sessions wait through).
pub(crate) fn view_from(meta: Option<&SaleMeta>, frontier: u64, issued: u64) -> RoomView {
    let Some(meta) = meta else {
        return RoomView {
            loaded: true,
            frontier,
            issued,
            opens_at_ms: i64::MAX,
            max_seats: 1,
            active_cap: u64::MAX,
            stock_factor: 2.0,
            ..RoomView::default()
        };
    };
    RoomView {
        loaded: true,
        frontier,
        issued,
        opens_at_ms: meta.opens_at_ms,
        rate: meta.rate,
        measured_rate: None,
        token_ttl_ms: meta.token_ttl_ms,
        max_seats: meta.max_seats,
        paused: meta.paused,
        sold_out: meta.sold_out,
        drawn: false,
        dead_known: 0,
        commitment: meta.lottery_commitment.clone(),
        active_cap: meta.active_cap,
        stock_factor: meta.stock_factor,
        unspent: meta.unspent,
        pools: meta.pools.clone(),
        door: meta.door,
        // The driver measures them across ticks.
        join_rate: 0.0,
        join_rate_low: 0.0,
        autopilot: meta.autopilot.clone(),
    }
}

/// The draw, once the pre-queue has closed (its size and digest are set) and the secret is known.
pub(crate) fn draw_from(meta: &SaleMeta) -> Option<Draw> {
    let size = meta.prequeue_size?;
    let digest = meta.prequeue_digest.as_deref()?;
    let secret: [u8; 32] = hex::decode(meta.lottery_secret.as_deref()?)
        .ok()?
        .try_into()
        .ok()?;
    Some(Draw::new(draw_seed(&secret, digest), size))
}

/// Reads a sale's public figures in one round trip (for the summary endpoint); `None` if the
/// sale is not armed.
pub async fn read_view(
    conn: &mut RedisConn,
    keys: &SaleKeys,
) -> redis::RedisResult<Option<RoomView>> {
    let read = crate::scripts::room::read_sale(conn, keys).await?;
    Ok(read
        .meta
        .map(|meta| view_from(Some(&meta), read.frontier, read.issued)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_follows_the_measured_rate_and_is_unknown_before_opening() {
        let mut view = RoomView {
            opens_at_ms: 1_000,
            rate: 4.0,
            ..Default::default()
        };
        assert_eq!(view.eta_secs(10, 999), None);
        assert_eq!(view.eta_secs(10, 1_000), Some(3));
        view.measured_rate = Some(2.0);
        assert_eq!(view.eta_secs(8, 2_000), Some(4));
        view.paused = true;
        assert_eq!(view.eta_secs(8, 2_000), None);
    }

    #[test]
    fn everyone_is_woken_by_news_for_everyone_only() {
        let view = RoomView {
            loaded: true,
            frontier: 10,
            measured_rate: Some(100.0),
            unspent: 5,
            ..Default::default()
        };
        let with = |change: fn(&mut RoomView)| {
            let mut newer = view.clone();
            change(&mut newer);
            view.news_for_everyone(&newer)
        };
        assert!(!with(|_| {}), "nothing new");
        // What moves positions, ETAs or the controller reaches sessions another way.
        assert!(!with(|v| v.unspent = 6));
        assert!(!with(|v| v.active_cap = 9));
        assert!(!with(|v| v.measured_rate = Some(150.0)));
        assert!(!with(|v| v.frontier = 11));
        assert!(!with(|v| v.dead_known = 1));
        assert!(!with(|v| v.issued = 1));
        assert!(!with(|v| v.max_seats = 2));
        // What every session acts on at once does.
        assert!(with(|v| v.loaded = false));
        assert!(with(|v| v.paused = true));
        assert!(with(|v| v.sold_out = true));
        assert!(with(|v| v.drawn = true));
        assert!(with(|v| v.opens_at_ms = 7));
    }

    fn armed() -> SaleMeta {
        SaleMeta {
            opens_at_ms: 5_000,
            rate: 25.0,
            token_ttl_ms: 60_000,
            max_seats: 4,
            active_cap: 300,
            stock_factor: 1.5,
            pools: vec!["floor".into(), "balcony".into()],
            lottery_commitment: "c0ffee".into(),
            unspent: 7,
            ..SaleMeta::default()
        }
    }

    #[test]
    fn an_unarmed_sale_is_a_loaded_view_that_never_opens() {
        let view = view_from(None, 3, 9);
        assert!(view.loaded, "sessions must not wait for a view forever");
        assert_eq!((view.frontier, view.issued), (3, 9));
        assert_eq!(view.opens_at_ms, i64::MAX);
        assert_eq!(
            view.eta_secs(1, i64::MAX - 1),
            None,
            "no ETA before it opens"
        );
        assert!(view.pools.is_empty() && !view.sold_out && !view.paused);
    }

    #[test]
    fn an_armed_sale_shows_its_settings_and_counters() {
        let meta = SaleMeta {
            paused: true,
            sold_out: true,
            ..armed()
        };
        let view = view_from(Some(&meta), 10, 42);
        assert_eq!(
            view,
            RoomView {
                loaded: true,
                frontier: 10,
                issued: 42,
                opens_at_ms: 5_000,
                rate: 25.0,
                token_ttl_ms: 60_000,
                max_seats: 4,
                paused: true,
                sold_out: true,
                commitment: "c0ffee".into(),
                active_cap: 300,
                stock_factor: 1.5,
                unspent: 7,
                pools: vec!["floor".into(), "balcony".into()],
                ..RoomView::default()
            }
        );
    }

    #[test]
    fn the_draw_is_known_once_the_prequeue_closed_and_the_secret_is_readable() {
        let secret = hex::encode([7u8; 32]);
        let closed = SaleMeta {
            prequeue_size: Some(50),
            prequeue_digest: Some("d1".into()),
            lottery_secret: Some(secret.clone()),
            ..armed()
        };
        let draw = draw_from(&closed).expect("closed with a secret");
        assert_eq!(draw.size(), 50);
        let expected = Draw::new(draw_seed(&[7u8; 32], "d1"), 50);
        assert_eq!(
            (1..=50).map(|t| draw.place(t)).collect::<Vec<_>>(),
            (1..=50).map(|t| expected.place(t)).collect::<Vec<_>>(),
            "the draw is the one the commitment was made for"
        );
        let open = SaleMeta {
            prequeue_size: None,
            ..closed.clone()
        };
        assert!(
            draw_from(&open).is_none(),
            "not before the pre-queue closes"
        );
        let garbled = SaleMeta {
            lottery_secret: Some("not hex".into()),
            ..closed
        };
        assert!(draw_from(&garbled).is_none(), "a bad secret draws nothing");
    }
}
