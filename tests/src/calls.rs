//! What a test asks of its running Floodgate: reservations, tokens and identities, payments,
//! the ops API, Redis and PostgreSQL figures, the booking binary's commands.

use super::*;

impl TestApp {
    /// One reservation request, as `floodgate_client` makes it: the 201's body, or why not.
    pub async fn reserve(
        &self,
        sale: &str,
        token: &str,
        idempotency_key: &str,
        pool: &str,
        seats: u32,
    ) -> Answer<ReservationCreated> {
        self.booking_client()
            .reserve(sale, token, idempotency_key, pool, seats)
            .await
    }

    /// A reservation request with any JSON body (the tests of malformed requests): the status
    /// and the JSON body.
    pub async fn post_reservation(
        &self,
        sale: &str,
        token: &str,
        idempotency_key: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let api = format!("http://{}", self.booking);
        self.post_reservation_at(&api, sale, token, idempotency_key, body)
            .await
    }

    /// [`TestApp::post_reservation`] to the booking API at `api` (`http://host:port`): another
    /// booking process than the app's own.
    pub async fn post_reservation_at(
        &self,
        api: &str,
        sale: &str,
        token: &str,
        idempotency_key: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        self.answer(
            self.http
                .post(format!("{api}/v1/sales/{sale}/reservations"))
                .bearer_auth(token)
                .header("Idempotency-Key", idempotency_key)
                .json(body),
        )
        .await
    }

    /// A token for `sale` signed with the gateways' key, as a gateway would issue it.
    pub fn token(&self, sale: &str, ticket: u64, max_seats: u32, ttl_ms: i64) -> String {
        self.buyer_token(sale, ticket, max_seats, ttl_ms, None)
    }

    /// A token as a gateway issues it to the signed-in `buyer`'s place.
    pub fn buyer_token(
        &self,
        sale: &str,
        ticket: u64,
        max_seats: u32,
        ttl_ms: i64,
        buyer: Option<&str>,
    ) -> String {
        pass(&self.signer, sale, ticket, max_seats, ttl_ms, buyer)
    }

    /// An identity token for `sub` from the sign-in stand-in (as the operator's sign-in would
    /// give a signed-in buyer).
    pub async fn identity(&self, sub: &str) -> String {
        self.identity_with(&serde_json::json!({ "sub": sub })).await
    }

    /// An identity token from the sign-in stand-in with the claims `request` asks for (`sub`,
    /// and `aud`, `iss`, `expires_in_secs` to make it genuine yet wrong).
    pub async fn identity_with(&self, request: &serde_json::Value) -> String {
        let answer: serde_json::Value = self
            .http
            .post(format!("http://{}/v1/identity/tokens", self.sandbox))
            .json(request)
            .send()
            .await
            .expect("the sign-in stand-in answers")
            .json()
            .await
            .expect("a JSON token");
        answer["id_token"].as_str().expect("an id_token").to_owned()
    }

    /// Makes the sign-in stand-in sign with a new key (published beside the old ones); returns
    /// its key id.
    pub async fn rotate_identity_key(&self) -> String {
        let answer: serde_json::Value = self
            .http
            .post(format!("http://{}/v1/identity/rotate", self.sandbox))
            .bearer_auth(&self.payment_api_key)
            .send()
            .await
            .expect("the sign-in stand-in answers")
            .json()
            .await
            .expect("a JSON answer");
        answer["kid"].as_str().expect("a key id").to_owned()
    }

    /// `GET path` on the gateway with `headers`: the status and a refusal's code. Every refusal
    /// must say when to retry where its status asks for it (429 and 503 carry `Retry-After`).
    pub async fn gateway_get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, Option<String>) {
        let mut request = self.http.get(format!("http://{}{path}", self.gateway));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("the gateway answers");
        let status = response.status().as_u16();
        let retry_after = response.headers().contains_key("retry-after");
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        if matches!(status, 429 | 503) {
            assert!(retry_after, "{status} {body}: a refusal says when to retry");
        }
        (status, body["error"].as_str().map(str::to_owned))
    }

    /// One sample from a service's `GET /metrics` (Prometheus text, on its admin listener):
    /// `series` is the name with its labels as rendered, e.g.
    /// `floodgate_reservations_total{outcome="reserved"}`.
    pub async fn metric(&self, service: SocketAddr, series: &str) -> Option<f64> {
        let text = self
            .http
            .get(format!("http://{service}/metrics"))
            .send()
            .await
            .expect("metrics endpoint reachable")
            .text()
            .await
            .expect("metrics text");
        text.lines().find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

    /// Runs a one-key command that answers an integer (XLEN, SCARD, ...).
    pub async fn redis_int_cmd(&self, command: &str, key: &str) -> i64 {
        let mut conn = self.redis.clone();
        redis::cmd(command)
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("redis command")
    }

    /// Sends a request and returns its status and JSON body (every Floodgate answer is JSON).
    pub async fn answer(&self, request: reqwest::RequestBuilder) -> (u16, serde_json::Value) {
        let response = request.send().await.expect("service reachable");
        let status = response.status().as_u16();
        (status, response.json().await.expect("a JSON body"))
    }

    /// Delivers a payment-provider webhook as the provider does, signed with `secret` at
    /// `timestamp` (Unix seconds): the status and JSON body.
    pub async fn deliver_webhook(
        &self,
        event: &floodgate_protocol::payments::WebhookEvent,
        timestamp: i64,
        secret: &str,
    ) -> (u16, serde_json::Value) {
        use floodgate_protocol::payments::{sign, SIGNATURE_HEADER};
        let body = serde_json::to_vec(event).unwrap();
        self.answer(
            self.http
                .post(format!("http://{}/v1/payments/webhook", self.booking))
                .header(SIGNATURE_HEADER, sign(secret.as_bytes(), timestamp, &body))
                .body(body),
        )
        .await
    }

    /// Reads an integer key (0 if missing).
    pub async fn redis_int(&self, key: &str) -> i64 {
        let mut conn = self.redis.clone();
        let value: Option<i64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("redis GET");
        value.unwrap_or(0)
    }

    /// GETs `url` and parses its JSON body, whatever the status.
    pub async fn get_json(&self, url: &str) -> serde_json::Value {
        self.http
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The drawn order of `sale`'s closed pre-queue, from the public record of the gateway at
    /// `gateway` (the draw seed as published; tests of the record itself recompute it).
    pub async fn drawn_order(
        &self,
        gateway: SocketAddr,
        sale: &str,
    ) -> floodgate_protocol::lottery::Draw {
        let body = self
            .get_json(&format!("http://{gateway}/v1/sales/{sale}/draw"))
            .await;
        assert_eq!(body["status"], "drawn", "{body}");
        let seed: [u8; 32] = hex::decode(body["draw_seed"].as_str().unwrap())
            .unwrap()
            .try_into()
            .unwrap();
        floodgate_protocol::lottery::Draw::new(seed, body["prequeue_size"].as_u64().unwrap())
    }

    /// Bookings of `sale` in PostgreSQL with `status`.
    pub async fn bookings(&self, sale: &str, status: &str) -> i64 {
        sqlx::query_scalar("select count(*) from bookings where sale_id = $1 and status = $2")
            .bind(sale)
            .bind(status)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    /// Runs a `floodgate-booking` admin command (`["sale", "reconcile", sale]`, say) against this
    /// app's Redis, broker and consumer group, with the PostgreSQL at `database_url`: its exit
    /// code and everything it printed (standard output, then standard error).
    pub fn booking_command(&self, database_url: &str, args: &[&str]) -> (i32, String) {
        self.booking_command_with(database_url, args, &[])
    }

    /// [`Self::booking_command`] with `extra` environment, which wins.
    pub fn booking_command_with(
        &self,
        database_url: &str,
        args: &[&str],
        extra: &[(&str, &str)],
    ) -> (i32, String) {
        let mut command = std::process::Command::new(binary("floodgate-booking"));
        command
            .args(args)
            .env("FLOODGATE_DATABASE_URL", database_url)
            .envs(self.redis_env())
            .env("FLOODGATE_REDIS_PREFIX", self.keys.prefix())
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", &self.topic)
            .env("FLOODGATE_CONSUMER_GROUP", &self.consumer_group)
            .env("FLOODGATE_AUDIT_KEY", &self.audit_key)
            .env("FLOODGATE_OPERATOR", "test-operator");
        command.envs(extra.iter().copied());
        run_to_end(&mut command)
    }

    /// The Redis settings of a binary run for this app: the shared Redis, or the app's private
    /// cluster if it runs on one.
    pub fn redis_env(&self) -> Vec<(&'static str, String)> {
        let mut env = redis_env();
        if let Some(seeds) = &self.redis_cluster {
            env.retain(|(name, _)| *name != "FLOODGATE_REDIS_CLUSTER_NODES");
            env.push(("FLOODGATE_REDIS_CLUSTER_NODES", seeds.join(",")));
        }
        env
    }

    /// A new sale as `spec` says (its id `prefix` and a random tail), opened 300 ms from now;
    /// returns once it is open.
    pub async fn open_sale(&self, prefix: &str, spec: SaleSpec) -> String {
        let sale = unique(prefix);
        let spec = SaleSpec {
            opens_in: Duration::from_millis(300),
            ..spec
        };
        self.create_sale(&sale, &spec).await;
        self.until_open(&sale).await;
        sale
    }

    /// Waits until `sale` has opened (as the ops API sees it).
    pub async fn until_open(&self, sale: &str) {
        let path = format!("/admin/v1/sales/{sale}");
        eventually("the sale opens", Duration::from_secs(10), || async {
            let (_, figures) = self
                .ops(reqwest::Method::GET, &path, &self.ops_token, None)
                .await;
            figures["open"] == true
        })
        .await;
    }

    /// Pauses (`"pause"`) or resumes (`"resume"`) admission through the ops API.
    pub async fn admission(&self, sale: &str, control: &str) {
        let (status, body) = self
            .ops(
                reqwest::Method::POST,
                &format!("/admin/v1/sales/{sale}/{control}"),
                &self.ops_token,
                None,
            )
            .await;
        assert_eq!(status, 200, "{control}: {body}");
    }

    /// Calls the ops API with bearer `token`; the status and JSON body.
    pub async fn ops(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut request = self
            .http
            .request(method, format!("http://{}{path}", self.admin))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    /// Starts paying for a reservation and completes the sandbox checkout with `outcome`
    /// (`succeed` or `fail`): the payment's start answer.
    pub async fn pay(
        &self,
        sale: &str,
        reservation_id: &str,
        secret: &str,
        outcome: &str,
    ) -> PaymentStarted {
        let checkout = serde_json::json!({ "outcome": outcome });
        self.pay_with(sale, reservation_id, secret, &checkout).await
    }

    /// As [`TestApp::pay`], with the sandbox's own checkout knobs (`delay_ms`, `deliveries`).
    pub async fn pay_with(
        &self,
        sale: &str,
        reservation_id: &str,
        secret: &str,
        checkout: &serde_json::Value,
    ) -> PaymentStarted {
        let started = self
            .booking_client()
            .start_payment(sale, reservation_id, secret)
            .await
            .expect("the payment starts");
        floodgate_client::booking::sandbox_checkout(
            &self.http,
            self.sandbox,
            &started.payment_id,
            checkout,
        )
        .await
        .expect("the sandbox takes the checkout");
        started
    }
}
