//! A real, certified OpenID Provider (`oidc-provider` from npm, in tests/browser/oidc-provider.mjs)
//! run by a test: its own issuer on a loopback port, RS256 ID tokens, PKCE required, CORS on
//! its token endpoint for the page's origin. The page is registered as a public client by
//! Dynamic Client Registration once the gateway's address is known.

use std::path::Path;

use tokio::io::{AsyncBufReadExt, BufReader};

/// What the services are told of an issuer: who it is, where its keys are, and the audience
/// (the page's client id) its ID tokens must carry.
#[derive(Clone, Debug)]
pub struct IssuerSettings {
    pub issuer: String,
    pub jwks_url: String,
    pub audience: String,
}

/// The provider's Node process; it stops when dropped.
pub struct OidcProvider {
    _node: tokio::process::Child,
    pub issuer: String,
    pub client_id: String,
    registration_token: String,
}

impl OidcProvider {
    /// Starts the provider; the page will be `client_id`.
    pub async fn start(client_id: &str) -> Self {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
        assert!(
            dir.join("node_modules/oidc-provider").exists(),
            "oidc-provider is missing: deploy/stack.sh up installs it"
        );
        let registration_token = crate::unique("reg-");
        let mut node = tokio::process::Command::new("node")
            .arg("oidc-provider.mjs")
            .arg(client_id)
            .arg(&registration_token)
            .current_dir(&dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let mut lines = BufReader::new(node.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("the provider starts in time")
            .unwrap()
            .expect("the provider prints its issuer");
        let started: serde_json::Value = serde_json::from_str(&line).unwrap();
        // Whatever else it prints is read and dropped: a closed pipe would kill it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            _node: node,
            issuer: started["issuer"].as_str().unwrap().to_owned(),
            client_id: client_id.to_owned(),
            registration_token,
        }
    }

    /// The settings that make the services trust this provider's ID tokens for the page.
    pub fn settings(&self) -> IssuerSettings {
        IssuerSettings {
            issuer: self.issuer.clone(),
            jwks_url: format!("{}/jwks", self.issuer),
            audience: self.client_id.clone(),
        }
    }

    /// Registers the page served at `page` (its root, the redirect URI) as a public client using
    /// the authorization code flow with PKCE.
    pub async fn register_page(&self, page: &str) {
        let answer = reqwest::Client::new()
            .post(format!("{}/reg", self.issuer))
            .bearer_auth(&self.registration_token)
            .json(&serde_json::json!({
                "application_type": "web",
                "redirect_uris": [page],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
            }))
            .send()
            .await
            .expect("the provider answers");
        let status = answer.status();
        let body = answer.text().await.unwrap_or_default();
        assert_eq!(status, 201, "the page is registered: {body}");
    }
}
