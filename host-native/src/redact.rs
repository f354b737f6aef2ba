//! Secrets out of what is printed: store URLs lose their passwords before any log line,
//! error message or `Debug` form shows them.

/// A store URL, or a comma-separated list of PostgreSQL URLs, without its secrets: in each
/// URL everything between `://` and the last `@` before the query (user and password) becomes
/// `…`, and the value of every `password` query parameter becomes `…`.
pub fn url(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        // A comma starts a new URL only where a scheme follows it (as the store list says).
        let cut = rest
            .match_indices(',')
            .map(|(i, _)| i)
            .find(|&i| rest[i + 1..].starts_with("postgres"));
        let (one, more) = match cut {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        out.push_str(&one_url(one));
        match more {
            Some(m) => {
                out.push(',');
                rest = m;
            }
            None => return out,
        }
    }
}

fn one_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let base = match (base.find("://"), base.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}…{}", &base[..s + 3], &base[at..]),
        _ => base.to_owned(),
    };
    match query {
        None => base,
        Some(q) => {
            let pairs: Vec<String> = q
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=…"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{base}?{}", pairs.join("&"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_left_in() {
        for (given, shown) in [
            ("postgres://u:s3cret@h:5432/db", "postgres://…@h:5432/db"),
            ("postgres://u:s3/c@r@h/db", "postgres://…@h/db"),
            (
                "postgres://h/db?user=u&password=s3cret&sslmode=require",
                "postgres://h/db?user=u&password=…&sslmode=require",
            ),
            (
                "postgres://a:s3cret@h1/db,postgresql://b:s3cret@h2/db",
                "postgres://…@h1/db,postgresql://…@h2/db",
            ),
            ("postgres://h1,h2/db", "postgres://h1,h2/db"),
            ("file:/tmp/x", "file:/tmp/x"),
        ] {
            assert_eq!(url(given), shown);
            assert!(!url(given).contains("s3"), "{given}");
        }
    }
}
