//! What differs between the engines: the clock, JSON access, row locks, and URL handling. Everything else is one
//! query text for both.

/// The database engine behind a [`super::Store`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// One SQLite file: the embedded default for one machine.
    Sqlite,
    /// One PostgreSQL database shared by several replicas.
    Postgres,
}

impl Engine {
    /// The engine's name (`sqlite`, `postgres`).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        }
    }

    /// An SQL expression for the current UTC time as RFC 3339 text with milliseconds (how every timestamp column
    /// stores time, so that text order is time order on both engines).
    pub(crate) fn now(self) -> &'static str {
        match self {
            Engine::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            Engine::Postgres => "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
        }
    }

    /// [`Engine::now`] shifted by `seconds` (negative: in the past).
    pub(crate) fn now_plus(self, seconds: i64) -> String {
        match self {
            Engine::Sqlite => format!("strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '{seconds:+} seconds')"),
            Engine::Postgres => format!(
                "to_char((clock_timestamp() + interval '{seconds} seconds') AT TIME ZONE 'UTC', \
                 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
            ),
        }
    }

    /// An SQL expression for the size in bytes of the text column `column` (SQLite's `length` of text counts
    /// characters; of a blob, bytes).
    pub(crate) fn byte_length(self, column: &str) -> String {
        match self {
            Engine::Sqlite => format!("length(CAST({column} AS BLOB))"),
            Engine::Postgres => format!("octet_length({column})"),
        }
    }

    /// An SQL expression for the text value of the top-level `key` of the JSON text column `column` (NULL when
    /// absent).
    pub(crate) fn json_text(self, column: &str, key: &str) -> String {
        match self {
            Engine::Sqlite => format!("json_extract({column}, '$.{key}')"),
            Engine::Postgres => format!("({column}::jsonb ->> '{key}')"),
        }
    }

    /// An SQL condition: the JSON text column `column` equals the JSON text `param` (a placeholder) as JSON values.
    pub(crate) fn json_equal(self, column: &str, param: &str) -> String {
        match self {
            Engine::Sqlite => format!("json({column}) = json({param})"),
            Engine::Postgres => format!("{column}::jsonb = {param}::jsonb"),
        }
    }

    /// The suffix of a `SELECT` that claims the rows it reads: `FOR UPDATE SKIP LOCKED` on PostgreSQL (concurrent
    /// claimers skip each other's rows); nothing on SQLite, whose `BEGIN IMMEDIATE` already admits one writer.
    pub(crate) fn skip_locked(self) -> &'static str {
        match self {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }
}

/// `url` with its password replaced by `***` (for logs and error messages).
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{scheme}://{name}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// A file path as the path of a `sqlite://` URL: `%`, `?` and `#` percent-encoded (sqlx decodes them).
pub(crate) fn encode_path(path: &str) -> String {
    path.replace('%', "%25").replace('?', "%3F").replace('#', "%23")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_and_paths_encoded() {
        assert_eq!(redact("postgres://u:secret@db:5432/p"), "postgres://u:***@db:5432/p");
        assert_eq!(redact("postgres://u@db/p"), "postgres://u@db/p");
        assert_eq!(redact("sqlite://data/x.db"), "sqlite://data/x.db");
        assert_eq!(encode_path("/a b/c?d#e%f"), "/a b/c%3Fd%23e%25f");
    }
}
