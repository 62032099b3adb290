//! The browser client's scripts and styles under content-hashed names (`/assets/app.<hash>.js`),
//! cacheable forever (`immutable`): a new release has new names, so no browser or CDN ever
//! serves a stale script. The page itself (`/`, `/index.html`) names them and is revalidated on
//! every load. Everything is read, hashed and compressed once, at start.

use std::collections::HashMap;

use anyhow::Context as _;
use std::path::Path;

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;

use floodgate_protocol::api::code;

mod markup;

use markup::{check_client_id, check_issuer, check_origin, origin_of};

use crate::cache::{respond, Asset};
use crate::error::ApiError;
use crate::AppState;

/// The page and its hashed assets.
pub struct Assets {
    index: Option<Asset>,
    by_name: HashMap<String, Asset>,
    /// The Content-Security-Policy of every public answer: the page's own origin, and the
    /// sign-in's where the page signs buyers in.
    pub policy: HeaderValue,
}

impl Default for Assets {
    fn default() -> Self {
        Self {
            index: None,
            by_name: HashMap::new(),
            policy: page_policy(&[]),
        }
    }
}

/// What the page is told beyond its files, written into its metadata.
#[derive(Default)]
pub struct PageSettings<'a> {
    /// The payment provider's origins: checkout opens only there.
    pub checkout_origins: &'a [String],
    /// The operator's OpenID provider (its issuer URL) and the page's client id there (the
    /// services' identity audience). None: the page offers no sign-in.
    pub signin: Option<(&'a str, &'a str)>,
    /// Origins the page calls for the sign-in beyond the issuer's own (a provider whose token
    /// endpoint is elsewhere).
    pub signin_origins: &'a [String],
}

const IMMUTABLE: &str = "public, max-age=31536000, immutable";

impl Assets {
    /// Loads `dir`'s top-level `.js` and `.css` files and its `index.html`, rewriting the page's
    /// references (`src="app.js"`, `href="style.css"`) to the hashed names, and writing
    /// `settings` into its metadata: the origins it may send a payer to for checkout
    /// (`floodgate-checkout-origins`), the sign-in's issuer and client id
    /// (`floodgate-signin-issuer`, `floodgate-signin-client`).
    pub fn load(dir: &Path, settings: &PageSettings<'_>) -> std::io::Result<Self> {
        let origins = settings
            .checkout_origins
            .iter()
            .map(|o| check_origin("FLOODGATE_CHECKOUT_ORIGINS", o))
            .collect::<Result<Vec<_>, _>>()?
            .join(" ");
        let (issuer, client) = match settings.signin {
            Some((issuer, client)) => (check_issuer(issuer)?, check_client_id(client)?),
            None => (String::new(), String::new()),
        };
        let mut connect = settings
            .signin_origins
            .iter()
            .map(|o| check_origin("FLOODGATE_SIGNIN_ORIGINS", o))
            .collect::<Result<Vec<_>, _>>()?;
        if !issuer.is_empty() {
            connect.push(check_origin(
                "FLOODGATE_IDENTITY_ISSUER",
                origin_of(&issuer),
            )?);
        }
        let mut assets = Assets {
            policy: page_policy(&connect),
            ..Assets::default()
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            let content_type = match path.extension().and_then(|e| e.to_str()) {
                Some("js") => "text/javascript; charset=utf-8",
                Some("css") => "text/css; charset=utf-8",
                _ => continue,
            };
            files.push((name, content_type, std::fs::read(&path)?));
        }
        let renames = assets.name_modules(files)?;
        let index = dir.join("index.html");
        if index.exists() {
            let mut page = std::fs::read_to_string(index)?;
            for (name, hashed) in &renames {
                for attribute in ["src", "href"] {
                    page = page.replace(
                        &format!("{attribute}=\"{name}\""),
                        &format!("{attribute}=\"/assets/{hashed}\""),
                    );
                }
            }
            page = page.replace(
                r#"<meta name="floodgate-checkout-origins" content="">"#,
                &format!(r#"<meta name="floodgate-checkout-origins" content="{origins}">"#),
            );
            for (name, value) in [
                ("floodgate-signin-issuer", &issuer),
                ("floodgate-signin-client", &client),
            ] {
                page = page.replace(
                    &format!(r#"<meta name="{name}" content="">"#),
                    &format!(r#"<meta name="{name}" content="{value}">"#),
                );
            }
            assets.index = Some(Asset::new("text/html; charset=utf-8", page.into_bytes()));
        }
        Ok(assets)
    }

    /// The browser client from the static folder, if one is configured, told of the site: the
    /// checkout origins, and the issuer the services trust and the page's client id there (the
    /// audience its tokens are issued for), with which the page signs buyers in.
    pub fn for_config(config: &crate::Config) -> anyhow::Result<Self> {
        let Some(dir) = &config.static_dir else {
            return Ok(Assets::default());
        };
        let signin = config
            .identity
            .identity_issuer
            .as_deref()
            .zip(config.identity.identity_audience.as_deref());
        let settings = PageSettings {
            checkout_origins: &config.checkout_origins,
            signin,
            signin_origins: &config.signin_origins,
        };
        Self::load(dir, &settings)
            .with_context(|| format!("reading the static folder {}", dir.display()))
    }

    /// Names `files` by their content's hash; the renames, plain name to hashed. A module is
    /// named once every module it imports (`from "./x.js"`) is, and its imports are pointed at
    /// their hashed names first, so its own hash changes with what it imports (the page imports
    /// the client and the sign-in, which imports the library).
    fn name_modules(
        &mut self,
        mut files: Vec<(String, &'static str, Vec<u8>)>,
    ) -> std::io::Result<Vec<(String, String)>> {
        let mut renames: Vec<(String, String)> = Vec::new();
        while !files.is_empty() {
            let named = |module: &String| renames.iter().any(|(plain, _)| plain == module);
            let Some(ready) = files
                .iter()
                .position(|(_, _, body)| imports(body).iter().all(named))
            else {
                let (name, _, body) = &files[0];
                let missing: Vec<String> =
                    imports(body).into_iter().filter(|m| !named(m)).collect();
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "{name} imports {missing:?}, which is not in the folder (or the modules \
                         import each other in a circle); the page's module from npm, \
                         oauth4webapi.js, is installed by deploy/stack.sh (npm ci in static/)"
                    ),
                ));
            };
            let (name, content_type, mut body) = files.swap_remove(ready);
            for (plain, hashed) in &renames {
                body = rewrite_import(body, plain, hashed);
            }
            let asset = Asset::new(content_type, body);
            let (stem, extension) = name.rsplit_once('.').unwrap_or((&name, ""));
            let hashed = format!("{stem}.{}.{extension}", asset.digest());
            renames.push((name, hashed.clone()));
            self.by_name.insert(hashed, asset);
        }
        Ok(renames)
    }
}

/// The modules of its folder a script imports (`from "./x.js"`).
fn imports(body: &[u8]) -> Vec<String> {
    const FROM: &[u8] = b"from \"./";
    let mut found = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.windows(FROM.len()).position(|w| w == FROM) {
        rest = &rest[at + FROM.len()..];
        let end = rest.iter().position(|&b| b == b'"').unwrap_or(rest.len());
        found.push(String::from_utf8_lossy(&rest[..end]).into_owned());
        rest = &rest[end..];
    }
    found
}

/// `body` with `from "./<plain>"` pointed at `/assets/<hashed>`.
fn rewrite_import(body: Vec<u8>, plain: &str, hashed: &str) -> Vec<u8> {
    let text = match String::from_utf8(body) {
        Ok(text) => text,
        // Not text: nothing to point anywhere.
        Err(not_text) => return not_text.into_bytes(),
    };
    text.replace(
        &format!("from \"./{plain}\""),
        &format!("from \"/assets/{hashed}\""),
    )
    .into_bytes()
}

/// `GET /assets/{name}`: a hashed script or style, immutable.
pub async fn asset(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let asset = state
        .assets
        .by_name
        .get(&name)
        .ok_or_else(|| ApiError::new(code::NOT_FOUND, "no such asset".into()))?;
    Ok(respond(asset, &headers, IMMUTABLE))
}

/// `GET /` and `GET /index.html`: the page, revalidated on every load.
pub async fn index(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let page = state
        .assets
        .index
        .as_ref()
        .ok_or_else(|| ApiError::new(code::NOT_FOUND, "no page is served here".into()))?;
    Ok(respond(page, &headers, "no-cache"))
}

/// The page keeps a buyer's identity and resume tokens in its storage, so every answer of the
/// public listener says: run only this origin's scripts and styles, talk only to this origin
/// (its WebSocket included) and to the sign-in's (`connect`: discovery and token endpoint),
/// never be framed, and send no Referer to the places it links to (a checkout or sign-in page
/// would otherwise learn the page's URL). The page has no inline script or style to allow.
fn page_policy(connect: &[String]) -> HeaderValue {
    let connect: String = connect.iter().map(|o| format!(" {o}")).collect();
    let policy = format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         font-src 'self'; connect-src 'self'{connect}; manifest-src 'self'; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'; object-src 'none'"
    );
    HeaderValue::from_str(&policy).expect("origins are checked to be header-safe")
}

pub fn with_page_headers(router: axum::Router, policy: HeaderValue) -> axum::Router {
    use axum::http::header;
    use tower_http::set_header::SetResponseHeaderLayer;
    let set =
        |name, value| SetResponseHeaderLayer::if_not_present(name, HeaderValue::from_static(value));
    router
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            policy,
        ))
        .layer(set(header::REFERRER_POLICY, "no-referrer"))
        .layer(set(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(set(header::X_FRAME_OPTIONS, "DENY"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[(&str, &str)]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("floodgate-assets-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, body) in files {
            std::fs::write(dir.join(name), body).unwrap();
        }
        dir
    }

    #[test]
    fn modules_are_named_after_what_they_import_however_deep() {
        let dir = folder(&[
            (
                "app.js",
                "import { s } from \"./signin.js\";\nimport { c } from \"./client.js\";",
            ),
            (
                "signin.js",
                "import * as o from \"./lib.js\";\nexport const s = 1;",
            ),
            ("lib.js", "export const o = 1;"),
            ("client.js", "export const c = 1;"),
        ]);
        let assets = Assets::load(&dir, &PageSettings::default()).unwrap();
        let hashed = |stem: &str| {
            let name = assets.by_name.keys().find(|n| n.starts_with(stem)).unwrap();
            (
                name.clone(),
                String::from_utf8(assets.by_name[name].body().to_vec()).unwrap(),
            )
        };
        let (lib, _) = hashed("lib.");
        let (signin, signin_body) = hashed("signin.");
        let (_, app_body) = hashed("app.");
        assert!(
            signin_body.contains(&format!("from \"/assets/{lib}\"")),
            "{signin_body}"
        );
        assert!(
            app_body.contains(&format!("from \"/assets/{signin}\"")),
            "{app_body}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_module_importing_one_not_there_stops_the_start() {
        let dir = folder(&[("signin.js", "import * as o from \"./oauth4webapi.js\";")]);
        let error = Assets::load(&dir, &PageSettings::default()).err().unwrap();
        assert!(error.to_string().contains("oauth4webapi.js"), "{error}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_page_may_talk_to_its_sign_in_and_nothing_else() {
        let dir = folder(&[]);
        let settings = PageSettings {
            signin: Some(("https://login.example.com/tenant/", "floodgate-web")),
            signin_origins: &["https://tokens.example.com".to_owned()],
            ..PageSettings::default()
        };
        let policy = Assets::load(&dir, &settings).unwrap().policy;
        assert!(policy
            .to_str()
            .unwrap()
            .contains("connect-src 'self' https://tokens.example.com https://login.example.com;"));
        assert!(Assets::default()
            .policy
            .to_str()
            .unwrap()
            .contains("connect-src 'self';"));
        for bad in [
            ("javascript:alert(1)", "c"),
            ("https://a.example", "a\"b"),
            ("http://login.example.com", "c"),
            ("http://localhost.evil.example", "c"),
        ] {
            let settings = PageSettings {
                signin: Some(bad),
                ..PageSettings::default()
            };
            assert!(Assets::load(&dir, &settings).is_err(), "{bad:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
