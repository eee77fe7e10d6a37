//! How a writing session names the fences it writes with: `name=fence`
//! pairs joined by commas (`a=5,b=7`), the value of PostgreSQL's
//! `lockward.fences` and MySQL's `@lockward_fences`.

/// `name` as it stands in a pair: `%`, `,`, `=`, `'` and `\` written
/// `%25`, `%2C`, `%3D`, `%27`, `%5C`, so the pairs split unambiguously and
/// the value needs no quoting in SQL or in libpq's options.
pub(crate) fn encode_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            ',' => out.push_str("%2C"),
            '=' => out.push_str("%3D"),
            '\'' => out.push_str("%27"),
            '\\' => out.push_str("%5C"),
            c => out.push(c),
        }
    }
    out
}

/// The pairs for `fences` (lock name, fence).
pub(crate) fn fences_value(fences: &[(&str, u64)]) -> String {
    fences
        .iter()
        .map(|(name, fence)| format!("{}={fence}", encode_name(name)))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_split_or_quote_are_encoded() {
        assert_eq!(fences_value(&[("a", 5), ("b", 7)]), "a=5,b=7");
        assert_eq!(
            fences_value(&[("x=1,y", 3), ("it's 50%", 4), (r"a\b", 1)]),
            r"x%3D1%2Cy=3,it%27s 50%25=4,a%5Cb=1"
        );
    }
}
