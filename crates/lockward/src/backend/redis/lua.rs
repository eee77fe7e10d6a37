//! The Lua scripts lockward runs on Redis, from one source for every
//! client: the pieces are the files of `lua/`, and `lua/scripts.txt` says
//! which pieces, in order, make each script. redis-rs sends a script with
//! EVALSHA and falls back to EVAL when the server answers NOSCRIPT (after
//! a restart or SCRIPT FLUSH). Each script is one atomic step on the
//! server; what it takes and answers is written at the top of its last
//! piece.

use redis::Script;

/// Every piece, by its file name without `.lua`.
const PIECES: &[(&str, &str)] = &[
    ("acquire", include_str!("lua/acquire.lua")),
    ("extend", include_str!("lua/extend.lua")),
    ("hold_back", include_str!("lua/hold_back.lua")),
    ("inspect", include_str!("lua/inspect.lua")),
    ("leave", include_str!("lua/leave.lua")),
    ("line", include_str!("lua/line.lua")),
    ("next_fence", include_str!("lua/next_fence.lua")),
    ("permit_extend", include_str!("lua/permit_extend.lua")),
    ("permit_held", include_str!("lua/permit_held.lua")),
    ("permit_lapsed", include_str!("lua/permit_lapsed.lua")),
    ("permit_list", include_str!("lua/permit_list.lua")),
    ("permit_release", include_str!("lua/permit_release.lua")),
    ("permit_take", include_str!("lua/permit_take.lua")),
    ("reader_extend", include_str!("lua/reader_extend.lua")),
    ("reader_list", include_str!("lua/reader_list.lua")),
    ("reader_read", include_str!("lua/reader_read.lua")),
    ("reader_release", include_str!("lua/reader_release.lua")),
    ("redlock_grant", include_str!("lua/redlock_grant.lua")),
    ("redlock_raise", include_str!("lua/redlock_raise.lua")),
    (
        "redlock_write_versioned",
        include_str!("lua/redlock_write_versioned.lua"),
    ),
    ("release", include_str!("lua/release.lua")),
    ("release_holder", include_str!("lua/release_holder.lua")),
    ("write_versioned", include_str!("lua/write_versioned.lua")),
];

/// Which pieces make each script (see the file's own comment).
const MANIFEST: &str = include_str!("lua/scripts.txt");

/// The text of script `name`: its pieces from [`MANIFEST`], joined; `None`
/// when the manifest has no such script or names a piece that is missing.
pub(crate) fn text(name: &str) -> Option<String> {
    let pieces = MANIFEST
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .find(|(script, _)| script.trim() == name)?
        .1;
    pieces
        .split_whitespace()
        .map(|piece| PIECES.iter().find(|(n, _)| *n == piece).map(|(_, t)| *t))
        .collect()
}

/// Script `name`, hashed. The names the backends use are checked by a
/// test against the manifest, so the fallback (a script that fails when
/// run, saying which one is missing) is never sent.
pub(crate) fn script(name: &str) -> Script {
    match text(name) {
        Some(text) => Script::new(&text),
        None => Script::new(&format!(
            "return redis.error_reply('lockward: no script {name} in lua/scripts.txt')"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scripts the Redis and Redlock backends build.
    const USED: &[&str] = &[
        "acquire",
        "release",
        "leave",
        "extend",
        "hold_back",
        "inspect",
        "write_versioned",
        "reader_read",
        "reader_extend",
        "reader_release",
        "reader_list",
        "permit_take",
        "permit_extend",
        "permit_release",
        "permit_held",
        "permit_list",
        "redlock_grant",
        "redlock_raise",
        "redlock_write_versioned",
    ];

    #[test]
    fn every_script_the_backends_use_is_in_the_manifest_with_its_pieces() {
        for name in USED {
            let text = text(name).unwrap_or_else(|| panic!("{name}: missing"));
            assert!(text.contains("return"), "{name}: {text}");
        }
        assert!(text("nothing").is_none());
    }

    #[test]
    fn every_piece_is_a_file_of_the_folder_and_used() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend/redis/lua");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".lua")
                    .map(str::to_string)
            })
            .collect();
        files.sort();
        let pieces: Vec<String> = PIECES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(files, pieces, "PIECES lists every file of lua/, in order");
        for (piece, _) in PIECES {
            let used = MANIFEST
                .lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split_once('='))
                .any(|(_, p)| p.split_whitespace().any(|p| p == *piece));
            assert!(used, "{piece}.lua is in no script");
        }
    }
}
