//! The one typed layer over Floodgate's Lua scripts. Each script in `lua/` is declared once, in
//! [`crate::scripts`], with [`lua_script!`]: its file, the helpers it is composed with, its
//! `KEYS` and `ARGV` in order (each named, and described in the words of the script's own
//! header), and the type its reply is decoded into. The declaration is a struct whose fields
//! are the keys and arguments, so a call is written as a struct literal, every key and argument
//! by name, and nothing places a key or an argument by hand:
//!
//! ```ignore
//! let reply = Leave { gone: keys.gone(), holders: keys.holders(), ... }.run(&mut redis).await?;
//! ```
//!
//! Both services call the scripts through it, the benchmark writes a reservation's calls
//! through it ([`Written`]), and a test reads every script's header against its declaration.

use redis::aio::ConnectionLike;
use redis::ToRedisArgs;

/// The helper files a script's body is composed with (`crate::lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Helpers {
    /// The body alone.
    None,
    /// `lua/clock.lua`: Redis' clock and the arming rule.
    Clock,
    /// `lua/clock.lua` and `lua/lib.lua`: a pool script, with the pool's common `KEYS` layout.
    Pool,
    /// `lua/clock.lua` and `lua/sale_lib.lua`: a script on a sale's slot.
    Sale,
}

/// What Rust knows of a script: where it is, and what it takes.
#[derive(Debug)]
pub struct Declaration {
    /// Its file in `lua/`.
    pub file: &'static str,
    /// The file's text.
    pub body: &'static str,
    pub helpers: Helpers,
    /// The `KEYS` it shares with other scripts, first (a pool script's common layout,
    /// `lua/lib.lua`), if it does.
    pub layout: Option<&'static [(&'static str, &'static str)]>,
    /// Each of its own `KEYS`, in order after the layout's: the field's name and the header's
    /// words for it.
    pub keys: &'static [(&'static str, &'static str)],
    /// The `KEYS` after those, as many as the call has (`KEYS[n..]`), if it takes any.
    pub rest_keys: Option<(&'static str, &'static str)>,
    /// The `ARGV` it shares with other scripts, first (a pool's configuration), if it does.
    pub arg_layout: Option<&'static [(&'static str, &'static str)]>,
    /// Each of its own `ARGV`, in order after those, likewise.
    pub args: &'static [(&'static str, &'static str)],
    /// The `ARGV` after those, as many as the call has (`ARGV[n..]`), if it takes any.
    pub rest: Option<(&'static str, &'static str)>,
}

impl Declaration {
    /// The script as Redis runs it: the body with its helpers before it.
    pub fn compose(&self) -> redis::Script {
        match self.helpers {
            Helpers::None => crate::lua::script(self.body),
            Helpers::Clock => crate::lua::clocked_script(self.body),
            Helpers::Pool => crate::lua::pool_script(self.body),
            Helpers::Sale => crate::lua::sale_script(self.body),
        }
    }
}

/// Several `KEYS` that scripts share, in their order (a pool script's common layout).
pub trait KeyLayout {
    /// Each key's name and its words in the header that documents the layout.
    const KEYS: &'static [(&'static str, &'static str)];
    fn write<C: Call>(&self, call: &mut C);
}

/// Several `ARGV` that scripts share, in their order (a pool's configuration, as arming and
/// rebuilding take it).
pub trait ArgLayout {
    /// Each argument's name and its words in the headers.
    const ARGS: &'static [(&'static str, &'static str)];
    fn write<C: Call>(&self, call: &mut C);
}

/// Where a call's keys and arguments are written: the real invocation, or [`Written`].
pub trait Call {
    fn key(&mut self, key: &str);
    /// One argument, or several for a value that is several (a tuple of one item's fields).
    fn arg<A: ToRedisArgs>(&mut self, arg: &A);
}

impl Call for redis::ScriptInvocation<'_> {
    fn key(&mut self, key: &str) {
        redis::ScriptInvocation::key(self, key);
    }

    fn arg<A: ToRedisArgs>(&mut self, arg: &A) {
        redis::ScriptInvocation::arg(self, arg);
    }
}

/// A call written down as text: what `redis-benchmark` is given, and what a test reads.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Written {
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

impl Call for Written {
    fn key(&mut self, key: &str) {
        self.keys.push(key.to_owned());
    }

    fn arg<A: ToRedisArgs>(&mut self, arg: &A) {
        for arg in arg.to_redis_args() {
            self.args.push(String::from_utf8_lossy(&arg).into_owned());
        }
    }
}

/// A reply that is not the shape its script documents: a bug between the script and its
/// declaration (or a Redis that is not the one Floodgate wrote), never a stranger's doing.
#[derive(Debug, thiserror::Error)]
#[error("{script} answered {reply:?}, which is not a reply it documents")]
pub struct OddReply {
    pub script: &'static str,
    pub reply: String,
}

/// Why a script's call gave no decoded reply.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// Redis did not answer, or refused the call (a timeout, a failover, `OOM`).
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    #[error(transparent)]
    Odd(#[from] OddReply),
}

/// For code whose every Redis failure is handled alike (logged, tried again next tick): an odd
/// reply is then a failure like a refused command.
impl From<ScriptError> for redis::RedisError {
    fn from(e: ScriptError) -> Self {
        match e {
            ScriptError::Redis(e) => e,
            ScriptError::Odd(odd) => (
                redis::ErrorKind::TypeError,
                "odd script reply",
                odd.to_string(),
            )
                .into(),
        }
    }
}

/// A reply decoded into its type, from Redis' value.
pub trait FromReply: Sized {
    fn from_reply(value: redis::Value) -> Result<Self, String>;
}

/// The plain shapes `redis` itself reads (a number, a list of strings), for a script whose
/// reply is one of them as it stands.
macro_rules! plain_replies {
    ($($t:ty),*) => {$(
        impl FromReply for $t {
            fn from_reply(value: redis::Value) -> Result<Self, String> {
                redis::from_owned_redis_value(value.clone()).map_err(|_| format!("{value:?}"))
            }
        }
    )*};
}

plain_replies!(
    i64,
    u64,
    String,
    Vec<String>,
    Vec<Option<String>>,
    Vec<i64>,
    (i64, u64, i64),
    redis::Value
);

/// A reply as a list of strings, the shape most scripts answer in, for a decoder to read.
pub fn strings(value: redis::Value) -> Result<Vec<String>, String> {
    Vec::<String>::from_reply(value)
}

/// A domain type read from the list of strings most scripts answer in (`{"sold_out", "3",
/// ...}`): the one place that knows its script's reply shape. Every such type is a
/// [`FromReply`], so a call's `.run()` answers it, or an odd reply ([`ScriptError::Odd`]).
pub trait FromStrings: Sized {
    /// `None`: not a reply the script documents.
    fn from_strings(reply: &[String]) -> Option<Self>;
}

impl<T: FromStrings> FromReply for T {
    fn from_reply(value: redis::Value) -> Result<Self, String> {
        let reply = strings(value)?;
        T::from_strings(&reply).ok_or_else(|| format!("{reply:?}"))
    }
}

/// A declared script.
pub trait LuaScript {
    /// Its declaration.
    const DECLARATION: &'static Declaration;
    /// What its reply is decoded into.
    type Reply: FromReply;
    /// The script, composed and hashed once per process.
    fn script() -> &'static redis::Script;
    /// Writes its keys, then its arguments, in the declared order.
    fn write<C: Call>(&self, call: &mut C);

    /// Runs it (`EVALSHA`, loading it first if Redis lacks it) and decodes its reply.
    #[allow(async_fn_in_trait)]
    async fn run<R: ConnectionLike + Send>(&self, redis: &mut R) -> Result<Self::Reply, ScriptError>
    where
        Self: Sized,
    {
        let mut invocation = Self::script().prepare_invoke();
        self.write(&mut invocation);
        let value: redis::Value = invocation.invoke_async(redis).await?;
        Self::Reply::from_reply(value).map_err(|reply| {
            ScriptError::Odd(OddReply {
                script: Self::DECLARATION.file,
                reply,
            })
        })
    }

    /// This call as text.
    fn written(&self) -> Written {
        let mut written = Written::default();
        self.write(&mut written);
        written
    }
}

/// Declares a script of `lua/`: a struct whose fields are its keys (strings) and its arguments,
/// and its [`LuaScript`] implementation. The words after each field are the script header's own
/// for that key or argument (a test holds the two together).
#[macro_export]
macro_rules! lua_script {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? {
            file: $file:literal,
            helpers: $helpers:ident,
            reply: $reply:ty,
            $(layout { $layout:ident: $layout_ty:ty })?
            keys { $($key:ident: $key_doc:literal),* $(,)? }
            $(rest_keys { $rest_keys:ident = $rest_keys_doc:literal })?
            $(arg_layout { $arg_layout:ident: $arg_layout_ty:ty })?
            args { $($arg:ident: $arg_ty:ty = $arg_doc:literal),* $(,)? }
            $(rest { $rest:ident: $rest_ty:ty = $rest_doc:literal })?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name $(<$lt>)? {
            $(pub $layout: $layout_ty,)?
            $(pub $key: String,)*
            $(pub $rest_keys: Vec<String>,)?
            $(pub $arg_layout: $arg_layout_ty,)?
            $(pub $arg: $arg_ty,)*
            $(pub $rest: $rest_ty,)?
        }

        impl $(<$lt>)? $crate::script::LuaScript for $name $(<$lt>)? {
            const DECLARATION: &'static $crate::script::Declaration = &$crate::script::Declaration {
                file: $file,
                body: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../lua/", $file)),
                helpers: $crate::script::Helpers::$helpers,
                layout: $crate::lua_script!(@layout $($layout_ty)?),
                keys: &[$((stringify!($key), $key_doc)),*],
                rest_keys: $crate::lua_script!(@rest $($rest_keys, $rest_keys_doc)?),
                arg_layout: $crate::lua_script!(@arg_layout $($arg_layout_ty)?),
                args: &[$((stringify!($arg), $arg_doc)),*],
                rest: $crate::lua_script!(@rest $($rest, $rest_doc)?),
            };
            type Reply = $reply;

            fn script() -> &'static ::redis::Script {
                static SCRIPT: ::std::sync::LazyLock<::redis::Script> =
                    ::std::sync::LazyLock::new(|| {
                        $crate::script::Declaration {
                            file: $file,
                            body: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../lua/", $file)),
                            helpers: $crate::script::Helpers::$helpers,
                            layout: None,
                            keys: &[],
                            rest_keys: None,
                            arg_layout: None,
                            args: &[],
                            rest: None,
                        }
                        .compose()
                    });
                &SCRIPT
            }

            fn write<C: $crate::script::Call>(&self, call: &mut C) {
                $($crate::script::KeyLayout::write(&self.$layout, call);)?
                $(call.key(&self.$key);)*
                $(for key in &self.$rest_keys { call.key(key); })?
                $($crate::script::ArgLayout::write(&self.$arg_layout, call);)?
                $(call.arg(&self.$arg);)*
                $(for item in self.$rest.iter() { call.arg(item); })?
            }
        }
    };
    (@layout) => { None };
    (@layout $layout_ty:ty) => { Some(<$layout_ty as $crate::script::KeyLayout>::KEYS) };
    (@arg_layout) => { None };
    (@arg_layout $arg_layout_ty:ty) => { Some(<$arg_layout_ty as $crate::script::ArgLayout>::ARGS) };
    (@rest) => { None };
    (@rest $rest:ident, $doc:literal) => { Some((stringify!($rest), $doc)) };
}
