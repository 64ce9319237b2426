//! Hostile file systems under an upstream JSONL root: writes never leave the
//! root through a symbolic link.

use crate::support;

use std::fs;
use std::os::unix::fs::symlink;

use support::{T0, lines, on, turn};

/// A store argument naming a raw JSONL root.
fn store(root: &std::path::Path) -> String {
    format!("jsonl+none:{}", root.display())
}

#[test]
fn a_symlinked_project_or_session_directory_is_refused_and_nothing_leaves_the_root() {
    for linked in ["_no-cwd", "_no-cwd/newone"] {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("root"), dir.path().join("outside"));
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&outside).unwrap();
        let link = root.join(linked);
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        symlink(&outside, &link).unwrap();

        let store = store(&root);
        let out = on(
            std::path::Path::new(&store),
            &["append", "newone", "--create"],
            &lines(&turn(1, 0, T0)),
        );
        assert_eq!(
            (out.status, out.stdout.as_str(), out.stderr.as_str()),
            (
                4,
                "",
                format!(
                    "turnwal: write under {}: a symbolic link inside the JSONL root: turnwal \
                     never writes through one (writes would leave the root, and listing would \
                     not find them); replace it with a real directory\n",
                    link.display()
                )
                .as_str()
            ),
            "{linked}"
        );
        assert_eq!(
            fs::read_dir(&outside).unwrap().count(),
            0,
            "{linked}: wrote outside"
        );
        let ls = on(std::path::Path::new(&store), &["ls", "--json"], "");
        assert_eq!((ls.status, ls.stdout.as_str()), (0, ""), "{linked}");
    }
}
